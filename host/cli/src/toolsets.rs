//! `toolhost toolsets`: a running tool-set service's tool sets, their tools
//! and events, from the command line (`serve --http --store URL` is the
//! service; this is its client).

use std::io::Write as _;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::exit::{self, Failure, usage};
use crate::output::{print_json, write_table};
use crate::terminal::escaped;

/// The service could not be reached, or failed (5xx).
pub(crate) const SERVICE_FAILED: u8 = 4;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
    /// The service's base URL, e.g. http://127.0.0.1:8080 [env: TOOLHOST_SERVICE_URL]
    #[arg(long, global = true, value_name = "URL")]
    url: Option<String>,
    /// The bearer token that names your workspace [env: TOOLHOST_TOKEN]
    #[arg(long, global = true, value_name = "TOKEN")]
    token: Option<String>,
    /// Print the service's JSON instead of a table
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// List the workspace's tool sets
    List {
        /// Only tool sets whose labels match (`tier=gold,!retired`, `env in (a,b)`)
        #[arg(long, short = 'l', value_name = "SELECTOR")]
        selector: Option<String>,
        /// Only the tool set of this name
        #[arg(long)]
        name: Option<String>,
    },
    /// Print a tool set (by id or name) and its tools
    Get {
        /// The tool set's id (`toolset_...`) or name
        tool_set: String,
    },
    /// Create the tool sets of a JSON file (a ToolSet, a list, or {"toolSets": [...]})
    Create {
        /// The file (`-`: standard input)
        #[arg(long, short = 'f', value_name = "FILE")]
        file: PathBuf,
    },
    /// Create or update the tool sets of a JSON file, matched by name, and their `tools`
    Apply {
        /// The file (`-`: standard input)
        #[arg(long, short = 'f', value_name = "FILE")]
        file: PathBuf,
    },
    /// Delete tool sets (by id or name), their tools with them
    Delete {
        /// The tool sets' ids or names
        #[arg(required = true)]
        tool_sets: Vec<String>,
    },
    /// A tool set's tools: status, whether MCP clients are offered them, approval
    Tools {
        /// The tool set's id or name
        tool_set: String,
    },
    /// A tool set's sync events, oldest first
    Events {
        /// The tool set's id or name
        tool_set: String,
        /// Keep printing events as they are recorded (until interrupted)
        #[arg(long, short = 'w')]
        watch: bool,
    },
}

/// A client of one service, as one workspace.
struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// What the service answered: status and JSON body.
struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    /// The answer of `status` and body `text`: its JSON, else the text.
    fn of(status: u16, text: String) -> Answer {
        let body =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        Answer { status, body }
    }
}

fn service_failed(error: anyhow::Error) -> Failure {
    Failure { code: SERVICE_FAILED, error }
}

impl Client {
    fn new(url: Option<String>, token: Option<String>) -> Result<Client, Failure> {
        let base = url
            .or_else(|| std::env::var("TOOLHOST_SERVICE_URL").ok())
            .ok_or_else(|| usage(anyhow::anyhow!("say where the service is: --url URL or TOOLHOST_SERVICE_URL")))?;
        let token = token
            .or_else(|| std::env::var("TOOLHOST_TOKEN").ok())
            .ok_or_else(|| usage(anyhow::anyhow!("say who you are: --token TOKEN or TOOLHOST_TOKEN")))?;
        let parsed = url::Url::parse(&base).map_err(|e| usage(anyhow::anyhow!("--url `{base}`: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(usage(anyhow::anyhow!("--url `{base}`: the service is reached over http or https")));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| service_failed(anyhow::anyhow!("cannot make an HTTP client: {e}")))?;
        Ok(Client { http, base: base.trim_end_matches('/').to_owned(), token })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token)
    }

    /// Send `request` (within a minute), and read its JSON answer.
    async fn send(&self, request: reqwest::RequestBuilder, what: &str) -> Result<Answer, Failure> {
        let response =
            request.timeout(std::time::Duration::from_secs(60)).send().await.map_err(|e| {
                service_failed(anyhow::anyhow!("{what}: cannot reach the service at {}: {e}", self.base))
            })?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| service_failed(anyhow::anyhow!("{what}: the service's answer was cut short: {e}")))?;
        Ok(Answer::of(status, text))
    }

    /// [`Client::send`], refusing any answer but `expected`.
    async fn expect(&self, request: reqwest::RequestBuilder, what: &str, expected: &[u16]) -> Result<Value, Failure> {
        let answer = self.send(request, what).await?;
        if expected.contains(&answer.status) { Ok(answer.body) } else { Err(refused(what, &answer)) }
    }

    async fn get(&self, path: &str, what: &str) -> Result<Value, Failure> {
        self.expect(self.request(reqwest::Method::GET, path), what, &[200]).await
    }

    /// Every item of a list (`member` of each page), page by page.
    async fn all(&self, path: &str, query: &[(&str, &str)], member: &str, what: &str) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let mut query: Vec<(&str, &str)> = query.to_vec();
            query.push(("pageSize", "1000"));
            if !token.is_empty() {
                query.push(("pageToken", &token));
            }
            let page = self.expect(self.request(reqwest::Method::GET, path).query(&query), what, &[200]).await?;
            items.extend(page[member].as_array().cloned().unwrap_or_default());
            match page["nextPageToken"].as_str() {
                Some(next) => token = next.to_owned(),
                None => return Ok(items),
            }
        }
    }

    /// The tool set `given` names: an id, else the one of that name.
    async fn find(&self, given: &str) -> Result<Value, Failure> {
        if given.starts_with("toolset_") {
            return self.get(&format!("/v1/tool_sets/{given}"), &format!("reading {given}")).await;
        }
        let found = self.all("/v1/tool_sets", &[("name", given)], "toolSets", &format!("finding `{given}`")).await?;
        found.into_iter().next().ok_or_else(|| usage(anyhow::anyhow!("this workspace has no tool set named `{given}`")))
    }
}

/// The service's refusal as a failure: its message, each problem with its
/// JSON pointer on a line of its own.
fn refused(what: &str, answer: &Answer) -> Failure {
    let error = &answer.body["error"];
    let mut text = match error["message"].as_str() {
        Some(message) => format!(
            "{what}: the service refused ({} {}): {}",
            answer.status,
            error["status"].as_str().unwrap_or(""),
            escaped(message)
        ),
        None => format!("{what}: the service answered {}: {}", answer.status, escaped(&answer.body.to_string())),
    };
    for detail in error["details"].as_array().into_iter().flatten() {
        let pointer = detail["pointer"].as_str().unwrap_or("");
        let message = detail["message"].as_str().unwrap_or("");
        text.push_str(&format!(
            "\n  {}: {}",
            escaped(if pointer.is_empty() { "/" } else { pointer }),
            escaped(message)
        ));
    }
    let code = if answer.status >= 500 { SERVICE_FAILED } else { exit::USAGE };
    Failure { code, error: anyhow::anyhow!(text) }
}

fn id_of(resource: &Value) -> String {
    resource["metadata"]["id"].as_str().unwrap_or("").to_owned()
}

fn kind_of(tool_set: &Value) -> String {
    tool_set["spec"]["adapter"].as_object().and_then(|a| a.keys().next().cloned()).unwrap_or_else(|| "-".to_owned())
}

fn labels_of(resource: &Value) -> String {
    let labels = resource["metadata"]["labels"].as_object();
    labels.into_iter().flatten().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(",")
}

/// How a tool set's last sync ended: `completed (4 tools)`, `failed: why`.
fn last_sync(tool_set: &Value) -> String {
    let event = &tool_set["info"]["lastSyncEvent"]["event"];
    match event["type"].as_str() {
        Some("sync_completed") => {
            format!("completed ({} tools)", event["syncCompleted"]["toolsSynced"].as_i64().unwrap_or(0))
        }
        Some("sync_failed") => format!("failed: {}", event["syncFailed"]["message"].as_str().unwrap_or("")),
        Some(other) => other.to_owned(),
        None => "-".to_owned(),
    }
}

fn table_failed(error: anyhow::Error) -> Failure {
    Failure { code: exit::PLUGIN_FAILED, error: error.context("cannot write the output") }
}

fn print_tool_sets(tool_sets: &[Value]) -> Result<(), Failure> {
    let rows: Vec<[String; 6]> = tool_sets
        .iter()
        .map(|set| {
            [
                id_of(set),
                set["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                kind_of(set),
                set["info"]["toolCount"].as_i64().map_or("-".to_owned(), |n| n.to_string()),
                last_sync(set),
                labels_of(set),
            ]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), ["ID", "NAME", "KIND", "TOOLS", "LAST SYNC", "LABELS"], &rows)
        .map_err(table_failed)
}

fn print_tools(tools: &[Value]) -> Result<(), Failure> {
    let rows: Vec<[String; 5]> = tools
        .iter()
        .map(|tool| {
            let status = tool["spec"]["status"].as_str().unwrap_or("").trim_start_matches("TOOL_STATUS_");
            [
                tool["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                status.to_lowercase(),
                if tool["info"]["served"] == true { "yes" } else { "no" }.to_owned(),
                if tool["spec"]["requiresApproval"] == true { "required" } else { "-" }.to_owned(),
                tool["info"]["mcpName"].as_str().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), ["TOOL", "STATUS", "SERVED", "APPROVAL", "MCP NAME"], &rows)
        .map_err(table_failed)
}

/// One event's row: time, type, who caused it, what it says.
fn event_row(event: &Value) -> [String; 4] {
    let data = &event["event"];
    let kind = data["type"].as_str().unwrap_or("").to_owned();
    let said = match kind.as_str() {
        "sync_started" => data["syncStarted"]["detail"].as_str().unwrap_or("").to_owned(),
        "sync_completed" => format!(
            "{} tools synced{}",
            data["syncCompleted"]["toolsSynced"].as_i64().unwrap_or(0),
            data["syncCompleted"]["message"].as_str().map(|m| format!(": {m}")).unwrap_or_default()
        ),
        "sync_failed" => format!(
            "{}: {}",
            data["syncFailed"]["errorType"].as_str().unwrap_or("error"),
            data["syncFailed"]["message"].as_str().unwrap_or("")
        ),
        _ => String::new(),
    };
    [
        event["metadata"]["createdAt"].as_str().unwrap_or("").to_owned(),
        kind,
        event["metadata"]["profileId"].as_str().unwrap_or("").to_owned(),
        said,
    ]
}

const EVENT_HEADER: [&str; 4] = ["TIME", "EVENT", "BY", "WHAT"];

/// The tool sets of a file: one ToolSet, a list, or `{"toolSets": [...]}`.
fn read_file(path: &std::path::Path) -> Result<Vec<Value>, Failure> {
    let text = if path == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| usage(anyhow::anyhow!("cannot read standard input: {e}")))?
    } else {
        std::fs::read_to_string(path).map_err(|e| usage(anyhow::anyhow!("cannot read {}: {e}", path.display())))?
    };
    let value: Value =
        serde_json::from_str(&text).map_err(|e| usage(anyhow::anyhow!("{} is not JSON: {e}", path.display())))?;
    let sets = match value {
        Value::Array(sets) => sets,
        Value::Object(mut map) if map.contains_key("toolSets") => match map.remove("toolSets") {
            Some(Value::Array(sets)) => sets,
            _ => return Err(usage(anyhow::anyhow!("{}: `toolSets` is not a list", path.display()))),
        },
        set @ Value::Object(_) => vec![set],
        _ => return Err(usage(anyhow::anyhow!("{}: not a tool set, nor a list of them", path.display()))),
    };
    for (i, set) in sets.iter().enumerate() {
        if !set["metadata"]["name"].is_string() {
            return Err(usage(anyhow::anyhow!("{}: tool set {i} has no metadata.name", path.display())));
        }
    }
    Ok(sets)
}

/// A create's `Idempotency-Key`: the digest of what is created, so that
/// running the same command again after a timeout makes nothing twice.
fn idempotency_key(path: &str, body: &Value) -> String {
    use sha2::Digest;
    format!("toolhost-cli-{:x}", sha2::Sha256::digest(format!("{path} {body}").as_bytes()))
}

/// What a resource's update would change: its name, labels, external id and spec.
fn differs(current: &Value, wanted: &Value) -> bool {
    let part = |value: &Value, pointer: &str| value.pointer(pointer).cloned().unwrap_or(Value::Null);
    let labels = |value: &Value| match part(value, "/metadata/labels") {
        Value::Null => json!({}),
        labels => labels,
    };
    labels(current) != labels(wanted)
        || ["/metadata/name", "/metadata/externalId"].iter().any(|p| part(current, p) != part(wanted, p))
        || !spec_holds(&part(current, "/spec"), &part(wanted, "/spec"))
}

/// Whether every member `wanted` gives is in `current` as given (the
/// service fills in defaults, such as a tool's status).
fn spec_holds(current: &Value, wanted: &Value) -> bool {
    match (current, wanted) {
        (Value::Object(current), Value::Object(wanted)) => {
            wanted.iter().all(|(key, value)| current.get(key).is_some_and(|c| spec_holds(c, value)))
        }
        (current, wanted) => current == wanted,
    }
}

/// Create `body` at `path`, or bring the resource of its name there in line.
async fn put_or_post(
    client: &Client,
    path: &str,
    member: &str,
    body: &Value,
    what: &str,
) -> Result<(&'static str, Value), Failure> {
    let name = body["metadata"]["name"].as_str().unwrap_or("");
    let found = client.all(path, &[("name", name)], member, what).await?;
    match found.into_iter().next() {
        None => {
            let key = idempotency_key(path, body);
            let request = client.request(reqwest::Method::POST, path).header("idempotency-key", key).json(body);
            Ok(("created", client.expect(request, what, &[201]).await?))
        }
        Some(current) if !differs(&current, body) => Ok(("unchanged", current)),
        Some(current) => {
            let id = id_of(&current);
            let version = current["metadata"]["resourceVersion"].as_str().unwrap_or("*").to_owned();
            let request = client
                .request(reqwest::Method::PUT, &format!("{path}/{id}"))
                .header("if-match", format!("\"{version}\""))
                .json(body);
            Ok(("updated", client.expect(request, what, &[200]).await?))
        }
    }
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args { command, url, token, json } = args;
    let client = Client::new(url, token)?;
    match command {
        Command::List { selector, name } => {
            let mut query = Vec::new();
            if let Some(selector) = &selector {
                query.push(("labelSelector", selector.as_str()));
            }
            if let Some(name) = &name {
                query.push(("name", name.as_str()));
            }
            let sets = client.all("/v1/tool_sets", &query, "toolSets", "listing tool sets").await?;
            if json { print_json(&sets)? } else { print_tool_sets(&sets)? }
        }
        Command::Get { tool_set } => {
            let set = client.find(&tool_set).await?;
            let id = id_of(&set);
            let tools = client.all(&format!("/v1/tool_sets/{id}/tools"), &[], "tools", "listing its tools").await?;
            if json {
                print_json(&json!({"toolSet": set, "tools": tools}))?;
            } else {
                print_tool_sets(std::slice::from_ref(&set))?;
                println!();
                print_tools(&tools)?;
            }
        }
        Command::Create { file } => {
            let mut made = Vec::new();
            for set in read_file(&file)? {
                let name = set["metadata"]["name"].as_str().unwrap_or("").to_owned();
                let key = idempotency_key("/v1/tool_sets", &set);
                let request =
                    client.request(reqwest::Method::POST, "/v1/tool_sets").header("idempotency-key", key).json(&set);
                made.push(("created", client.expect(request, &format!("creating `{name}`"), &[201]).await?));
            }
            print_changes(&made, json)?;
        }
        Command::Apply { file } => {
            let mut changes = Vec::new();
            for mut set in read_file(&file)? {
                let tools = set.as_object_mut().and_then(|s| s.remove("tools"));
                let name = set["metadata"]["name"].as_str().unwrap_or("").to_owned();
                let (action, applied) =
                    put_or_post(&client, "/v1/tool_sets", "toolSets", &set, &format!("applying `{name}`")).await?;
                let id = id_of(&applied);
                changes.push((action, applied));
                for tool in tools.as_ref().and_then(Value::as_array).into_iter().flatten() {
                    let tool_name = tool["metadata"]["name"].as_str().unwrap_or("");
                    let what = format!("applying tool `{tool_name}` of `{name}`");
                    changes
                        .push(put_or_post(&client, &format!("/v1/tool_sets/{id}/tools"), "tools", tool, &what).await?);
                }
            }
            print_changes(&changes, json)?;
        }
        Command::Delete { tool_sets } => {
            for given in tool_sets {
                let set = client.find(&given).await?;
                let id = id_of(&set);
                let request = client.request(reqwest::Method::DELETE, &format!("/v1/tool_sets/{id}"));
                client.expect(request, &format!("deleting `{given}`"), &[204]).await?;
                if json {
                    print_json(&json!({"deleted": id}))?;
                } else {
                    println!("deleted {id} ({})", escaped(set["metadata"]["name"].as_str().unwrap_or("")));
                }
            }
        }
        Command::Tools { tool_set } => {
            let id = id_of(&client.find(&tool_set).await?);
            let tools = client.all(&format!("/v1/tool_sets/{id}/tools"), &[], "tools", "listing tools").await?;
            if json { print_json(&tools)? } else { print_tools(&tools)? }
        }
        Command::Events { tool_set, watch } => {
            let id = match tool_set.starts_with("toolset_") {
                // Events outlive their tool set: a deleted one's are read by id.
                true => tool_set,
                false => id_of(&client.find(&tool_set).await?),
            };
            let path = format!("/v1/tool_sets/{id}/events");
            if watch {
                return watch_events(&client, &path, json).await;
            }
            let events = client.all(&path, &[], "events", "listing events").await?;
            if json {
                print_json(&events)?;
            } else {
                let rows: Vec<[String; 4]> = events.iter().map(event_row).collect();
                write_table(&mut std::io::stdout().lock(), EVENT_HEADER, &rows).map_err(table_failed)?;
            }
        }
    }
    Ok(0)
}

fn print_changes(changes: &[(&str, Value)], json: bool) -> Result<(), Failure> {
    if json {
        let list: Vec<Value> =
            changes.iter().map(|(action, value)| json!({"action": action, "resource": value})).collect();
        return print_json(&list);
    }
    let rows: Vec<[String; 3]> = changes
        .iter()
        .map(|(action, value)| {
            [action.to_string(), id_of(value), value["metadata"]["name"].as_str().unwrap_or("").to_owned()]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), ["ACTION", "ID", "NAME"], &rows).map_err(table_failed)
}

/// Follow `path?watch=true`, printing each event as it comes (a line of
/// JSON with `--json`), and reconnecting after the last one when the
/// service ends a watch.
async fn watch_events(client: &Client, path: &str, json: bool) -> Result<u8, Failure> {
    let mut last: Option<String> = None;
    let mut header = !json;
    loop {
        let mut request = client
            .request(reqwest::Method::GET, path)
            .query(&[("watch", "true")])
            .header("accept", "text/event-stream");
        if let Some(last) = &last {
            request = request.header("last-event-id", last);
        }
        let mut response = request.send().await.map_err(|e| {
            service_failed(anyhow::anyhow!("watching: cannot reach the service at {}: {e}", client.base))
        })?;
        if response.status().as_u16() != 200 {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            return Err(refused("watching", &Answer::of(status, text)));
        }
        // Bytes until a whole line: a character may be split across chunks.
        let mut pending: Vec<u8> = Vec::new();
        let mut data = String::new();
        while let Some(chunk) =
            response.chunk().await.map_err(|e| service_failed(anyhow::anyhow!("watching: the stream broke: {e}")))?
        {
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&byte| byte == b'\n') {
                let bytes: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&bytes);
                let line = line.trim_end_matches(['\r', '\n']);
                if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim_start());
                } else if let Some(value) = line.strip_prefix("id:") {
                    last = Some(value.trim().to_owned());
                } else if line.is_empty() && !data.is_empty() {
                    let event: Value = serde_json::from_str(&std::mem::take(&mut data)).unwrap_or(Value::Null);
                    let mut out = std::io::stdout().lock();
                    let written = if json {
                        writeln!(out, "{event}")
                    } else {
                        // Rows as they come, in columns as wide as the
                        // header's and the type's longest.
                        let [time, kind, by, what] = event_row(&event).map(|cell| escaped(&cell).into_owned());
                        let header_line = if std::mem::take(&mut header) {
                            let [time, kind, by, what] = EVENT_HEADER;
                            format!("{time:<24}  {kind:<14}  {by:<12}  {what}\n")
                        } else {
                            String::new()
                        };
                        writeln!(out, "{header_line}{time:<24}  {kind:<14}  {by:<12}  {what}")
                    };
                    let written = written.map_err(anyhow::Error::from);
                    written.and_then(|()| out.flush().map_err(anyhow::Error::from)).map_err(table_failed)?;
                }
            }
        }
    }
}
