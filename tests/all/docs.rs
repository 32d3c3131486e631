//! The book (`docs/`), the front page and DESIGN.md stay true to the code:
//! every relative link reaches a file, and its `#anchor` a heading there;
//! the book's table of contents lists every page; the CLI reference is the
//! command's own help, and the toolsets reference is the JSON Schemas' own
//! descriptions, and the service's API reference is the OpenAPI document
//! it serves. Run with `TOOLHOST_UPDATE_DOCS=1` to write the three
//! references again after changing the CLI, the schemas or the API.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The Markdown files of the docs: the front page, DESIGN.md, the book.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read a docs directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![root().join("README.md"), root().join("DESIGN.md")];
    walk(&root().join("docs/src"), &mut found);
    found.sort();
    found
}

/// A document's lines outside code blocks.
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter(move |(_, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchor a heading gets (GitHub's and mdBook's rule: lower case,
/// punctuation dropped, spaces to `-`).
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .filter_map(|(_, line)| line.strip_prefix('#'))
        .map(|heading| anchor(heading.trim_start_matches('#')))
        .collect()
}

/// The targets of a line's Markdown links (`[text](target)`).
fn links(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            found.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_in_the_docs_reaches_its_file_and_heading() {
    let mut broken = Vec::new();
    for document in documents() {
        let text = std::fs::read_to_string(&document).expect("read a document");
        let dir = document.parent().expect("a directory");
        for (number, line) in prose(&text) {
            // Inline code is not a link.
            let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
            for target in links(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() { document.clone() } else { dir.join(path) };
                let at = format!("{}:{}", document.strip_prefix(root()).unwrap().display(), number + 1);
                if !file.exists() {
                    broken.push(format!("{at}: {target}: no such file"));
                    continue;
                }
                if !fragment.is_empty() && file.extension().is_some_and(|e| e == "md") {
                    let there = std::fs::read_to_string(&file).expect("read the target");
                    if !anchors(&there).contains(fragment) {
                        broken.push(format!("{at}: {target}: no such heading"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_books_table_of_contents_lists_every_page() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let listed: BTreeSet<PathBuf> = summary.lines().flat_map(links).map(|l| src.join(l)).collect();
    let pages: BTreeSet<PathBuf> =
        documents().into_iter().filter(|p| p.starts_with(&src) && !p.ends_with("SUMMARY.md")).collect();
    let missing: Vec<_> = pages.difference(&listed).collect();
    assert!(missing.is_empty(), "pages SUMMARY.md does not list: {missing:?}");
}

/// Compare a generated reference with its page, or write the page when
/// `TOOLHOST_UPDATE_DOCS` is set.
fn current(page: &str, generated: &str) {
    let path = root().join(page);
    if std::env::var_os("TOOLHOST_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a page's directory")).expect("make the reference's directory");
        std::fs::write(&path, generated).expect("write the reference");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed.lines().zip(generated.lines()).position(|(a, b)| a != b);
        panic!(
            "{page} is not what the code generates (first difference at line {}); \
             run `TOOLHOST_UPDATE_DOCS=1 cargo test -p toolhost-tests --test all docs::` and commit it",
            line.map_or(committed.lines().count().min(generated.lines().count()), |l| l) + 1
        );
    }
}

fn help(args: &[&str]) -> String {
    let output = toolhost_tests::run_toolhost(args, None);
    assert!(output.status.success(), "toolhost {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8 help")
}

/// The subcommands a help text lists.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_cli_reference_is_the_commands_own_help() {
    let top = help(&["--help"]);
    let commands = subcommands(&top);
    assert!(commands.iter().any(|c| c == "serve") && commands.iter().any(|c| c == "call"), "{top}");
    let mut page = String::from(
        "# CLI reference\n\n\
         Every command's help, as `toolhost COMMAND --help` prints it. This page is\n\
         generated from the command itself: a test fails when they differ, and\n\
         `TOOLHOST_UPDATE_DOCS=1 cargo test -p toolhost-tests --test all docs::`\n\
         writes it again. Exit codes and examples are in [The CLI](../using/cli.md).\n\n\
         ## `toolhost`\n\n```text\n",
    );
    page.push_str(&top);
    page.push_str("```\n");
    for command in &commands {
        page.push_str(&format!("\n## `toolhost {command}`\n\n```text\n"));
        let text = help(&[command, "--help"]);
        page.push_str(&text);
        page.push_str("```\n");
        for sub in subcommands(&text) {
            page.push_str(&format!("\n### `toolhost {command} {sub}`\n\n```text\n"));
            page.push_str(&help(&[command, &sub, "--help"]));
            page.push_str("```\n");
        }
    }
    current("docs/src/reference/cli.md", &page);
}

/// A schema node with its `$ref` followed (within the same document).
fn resolve<'a>(schema: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => schema.pointer(pointer).map_or(node, |target| resolve(schema, target)),
        None => node,
    }
}

/// What a member holds, in a word or two.
fn kind(schema: &Value, node: &Value) -> String {
    let node_resolved = resolve(schema, node);
    if let Some(values) = node_resolved.get("enum").and_then(Value::as_array) {
        return values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
    }
    if let Some(value) = node_resolved.get("const") {
        return format!("`{value}`");
    }
    match node_resolved.get("type") {
        Some(Value::String(t)) if t == "array" => match node_resolved.get("items") {
            Some(items) => format!("array of {}", kind(schema, items)),
            None => "array".to_owned(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ if node_resolved.get("oneOf").or(node_resolved.get("anyOf")).is_some() => "one of several forms".to_owned(),
        _ => "any".to_owned(),
    }
}

/// One table row's description: the schema's, on one line.
fn description(schema: &Value, node: &Value) -> String {
    let text = node
        .get("description")
        .or_else(|| resolve(schema, node).get("description"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
    // Angle brackets outside code spans would be read as HTML tags.
    text.split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 0 { part.replace('<', "&lt;").replace('>', "&gt;") } else { part.to_string() })
        .collect::<Vec<_>>()
        .join("`")
}

/// The members of an object node: its own, and those of `then` (with the
/// condition of its `if`, told in `when`) and of `allOf`.
fn members<'a>(schema: &'a Value, node: &'a Value) -> Vec<(&'a str, &'a Value, bool, Option<String>)> {
    let node = resolve(schema, node);
    let mut found = Vec::new();
    let mut collect = |part: &'a Value, when: Option<String>| {
        let required: BTreeSet<&str> =
            part.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        if let Some(properties) = part.get("properties").and_then(Value::as_object) {
            for (name, member) in properties {
                found.push((name.as_str(), member, required.contains(name.as_str()), when.clone()));
            }
        }
    };
    collect(node, None);
    if let Some(then) = node.get("then") {
        let condition = node["if"]["properties"].as_object().and_then(|p| p.iter().next()).map(|(name, test)| {
            format!("when `{name}` is {}", test.get("const").map_or("as given".to_owned(), Value::to_string))
        });
        collect(then, condition);
    }
    for part in node.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        collect(resolve(schema, part), None);
    }
    found
}

/// A section per object of the schema, from `node` at `path` down.
fn document_object(schema: &Value, node: &Value, path: &str, seen: &mut BTreeSet<String>, page: &mut String) {
    let found = members(schema, node);
    if found.is_empty() || !seen.insert(path.to_owned()) {
        return;
    }
    page.push_str(&format!(
        "\n### `{path}`\n\n| member | holds | required | description |\n| --- | --- | --- | --- |\n"
    ));
    for (name, member, required, when) in &found {
        let mut text = description(schema, member);
        if let Some(when) = when {
            text = format!("({when}) {text}");
        }
        let required = if *required { "yes" } else { "" };
        page.push_str(&format!("| `{name}` | {} | {required} | {text} |\n", kind(schema, member)));
    }
    for (name, member, _, _) in found {
        let member = resolve(schema, member);
        let child = format!("{path}.{name}");
        document_object(schema, member, &child, seen, page);
        if let Some(items) = member.get("items") {
            document_object(schema, resolve(schema, items), &format!("{child}[]"), seen, page);
        }
        if let Some(values) = member.get("additionalProperties").filter(|v| v.is_object()) {
            document_object(schema, resolve(schema, values), &format!("{child}.*"), seen, page);
        }
    }
}

#[test]
fn the_toolsets_reference_is_the_schemas_own_descriptions() {
    let mut page = String::from(
        "# Toolsets file reference\n\n\
         Every member of a toolsets file, with what the JSON Schemas that check it\n\
         say. This page is generated from those schemas: a test fails when they\n\
         differ, and `TOOLHOST_UPDATE_DOCS=1 cargo test -p toolhost-tests --test all docs::`\n\
         writes it again. A file must satisfy both schemas; how the pieces fit\n\
         together, with examples, is in [Toolsets files](../using/toolsets.md).\n",
    );
    for (file, title) in [
        ("toolsets.schema.json", "The common toolsets format"),
        ("toolhost-toolsets.schema.json", "What toolhost adds and requires"),
    ] {
        let path = root().join("host/library/schema").join(file);
        let schema: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read a schema")).expect("JSON");
        page.push_str(&format!("\n## {title}\n\nFrom `host/library/schema/{file}`.\n"));
        if let Some(about) = schema.get("description").and_then(Value::as_str) {
            page.push_str(&format!("\n{}\n", about.split_whitespace().collect::<Vec<_>>().join(" ")));
        }
        document_object(&schema, &schema, "(file)", &mut BTreeSet::new(), &mut page);
    }
    current("docs/src/reference/toolsets.md", &page);
}

/// What a member of an API model holds: a link for a model of its own.
fn api_kind(document: &Value, node: &Value) -> String {
    let link = |target: &str| {
        let name = target.rsplit('/').next().unwrap_or(target);
        format!("[`{name}`](#{})", anchor(name))
    };
    if let Some(target) = node.get("$ref").and_then(Value::as_str) {
        return link(target);
    }
    if let Some(target) = node.pointer("/items/$ref").and_then(Value::as_str) {
        return format!("array of {}", link(target));
    }
    if let Some(target) = node.pointer("/additionalProperties/$ref").and_then(Value::as_str) {
        return format!("map of {}", link(target));
    }
    kind(document, node)
}

/// A model's table, then those of its members defined inside it.
fn document_model(document: &Value, node: &Value, path: &str, page: &mut String) {
    let found = members(document, node);
    if found.is_empty() {
        return;
    }
    let heading = if path.contains('.') { "####" } else { "###" };
    page.push_str(&format!("\n{heading} `{path}`\n\n"));
    if !path.contains('.')
        && let Some(about) = node.get("description").and_then(Value::as_str)
    {
        page.push_str(&format!("{}\n\n", description(document, &serde_json::json!({"description": about}))));
    }
    page.push_str("| member | holds | required | description |\n| --- | --- | --- | --- |\n");
    for (name, member, required, _) in &found {
        let required = if *required { "yes" } else { "" };
        let text = description(document, member);
        page.push_str(&format!("| `{name}` | {} | {required} | {text} |\n", api_kind(document, member)));
    }
    for (name, member, _, _) in found {
        if member.get("$ref").is_none() {
            document_model(document, member, &format!("{path}.{name}"), page);
            if let Some(items) = member.get("items").filter(|items| items.get("$ref").is_none()) {
                document_model(document, items, &format!("{path}.{name}[]"), page);
            }
        }
    }
}

#[test]
fn the_service_api_reference_is_its_served_openapi_document() {
    let dir = crate::service::scratch("reference");
    let store = format!("sqlite://{}", dir.join("tools.db").display());
    let (_service, base) = crate::service::spawn_service(&crate::service::service_config(&dir, &store, "x.test"));
    let reply = crate::service::rest("GET", &format!("{base}/v1/openapi.json"), None, None, &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let document = reply.body;
    let mut page = String::from(
        "# Tool-set service API reference\n\n\
         Every operation and model of the tool-set service's `/v1` API, from the\n\
         OpenAPI 3.1 document the service itself serves at `GET /v1/openapi.json`\n\
         (no token needed: feed it to a client generator). This page is generated\n\
         from that document: a test fails when they differ, and\n\
         `TOOLHOST_UPDATE_DOCS=1 cargo test -p toolhost-tests --test all docs::`\n\
         writes it again. How to run the service, with examples, is in\n\
         [The tool-set service](../using/service.md).\n",
    );
    if let Some(about) = document.pointer("/info/description").and_then(Value::as_str) {
        page.push_str(&format!("\n{}\n", about.split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    page.push_str("\n## Operations\n\n| operation | request | what |\n| --- | --- | --- |\n");
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("an item") {
            operations.push((path.as_str(), method.to_uppercase(), operation));
        }
    }
    for (path, method, operation) in &operations {
        let id = operation["operationId"].as_str().expect("an id");
        let summary = operation["summary"].as_str().unwrap_or("");
        page.push_str(&format!("| [`{id}`](#{}) | `{method} {path}` | {summary} |\n", anchor(id)));
    }
    let parameter = |node: &Value| -> Value {
        match node.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => document.pointer(pointer).cloned().expect("a parameter"),
            None => node.clone(),
        }
    };
    for (path, method, operation) in &operations {
        let id = operation["operationId"].as_str().expect("an id");
        page.push_str(&format!("\n### {id}\n\n`{method} {path}`: {}.\n", operation["summary"].as_str().unwrap_or("")));
        let parameters: Vec<Value> = operation["parameters"].as_array().into_iter().flatten().map(parameter).collect();
        if !parameters.is_empty() {
            page.push_str("\n| parameter | in | holds | required | description |\n| --- | --- | --- | --- | --- |\n");
            for p in &parameters {
                let required = if p["required"] == true { "yes" } else { "" };
                page.push_str(&format!(
                    "| `{}` | {} | {} | {required} | {} |\n",
                    p["name"].as_str().unwrap_or(""),
                    p["in"].as_str().unwrap_or(""),
                    api_kind(&document, &p["schema"]),
                    description(&document, p),
                ));
            }
        }
        if let Some(body) = operation.pointer("/requestBody/content/application~1json/schema") {
            page.push_str(&format!("\nBody: {}.\n", api_kind(&document, body)));
        }
        page.push_str("\n| answer | when | body |\n| --- | --- | --- |\n");
        for (status, answer) in operation["responses"].as_object().expect("responses") {
            let body = answer
                .pointer("/content/application~1json/schema")
                .map_or(String::new(), |schema| api_kind(&document, schema));
            page.push_str(&format!("| {status} | {} | {body} |\n", description(&document, answer)));
        }
    }
    page.push_str("\n## Models\n");
    for (name, model) in document["components"]["schemas"].as_object().expect("schemas") {
        document_model(&document, model, name, &mut page);
    }
    current("docs/src/reference/service-api.md", &page);
    std::fs::remove_dir_all(dir).ok();
}

/// The Rust sources of the workspace that the build compiles (examples,
/// plugins, fixtures, tests, the crates themselves).
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, found: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).expect("read a source directory") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() && !name.starts_with('.') && name != "target" && name != "templates" {
                walk(&path, found);
            } else if name.ends_with(".rs") {
                found.push((path.clone(), std::fs::read_to_string(&path).expect("read a source")));
            }
        }
    }
    let mut found = Vec::new();
    for dir in ["host", "plugin-sdk", "example-plugins", "tests", "protocol"] {
        walk(&root().join(dir), &mut found);
    }
    found
}

#[test]
fn every_rust_snippet_in_the_docs_is_a_piece_of_compiled_code() {
    let sources = sources();
    let trimmed: Vec<(&PathBuf, Vec<&str>)> =
        sources.iter().map(|(path, text)| (path, text.lines().map(str::trim).collect())).collect();
    let mut stale = Vec::new();
    for document in documents() {
        let text = std::fs::read_to_string(&document).expect("read a document");
        let mut lines = text.lines().enumerate();
        while let Some((number, line)) = lines.next() {
            if line.trim() != "```rust" {
                continue;
            }
            let snippet: Vec<&str> =
                lines.by_ref().map(|(_, l)| l).take_while(|l| l.trim() != "```").map(str::trim).collect();
            let found =
                trimmed.iter().any(|(_, source)| source.windows(snippet.len().max(1)).any(|w| w == snippet.as_slice()));
            if !found {
                stale.push(format!("{}:{}", document.strip_prefix(root()).unwrap().display(), number + 1));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "Rust snippets that are not, line for line, in any source file the build compiles \
         (copy them from an example, a plugin or a test): {stale:?}"
    );
}
