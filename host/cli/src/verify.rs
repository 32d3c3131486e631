//! `toolhost verify`: what a plugin source resolves to, its digest, and who
//! signed it, fetched and checked without running it.

use std::path::PathBuf;

use serde_json::json;

use crate::exit::{self, Failure, usage};
use crate::output::print_json;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The source: oci://registry/repository:tag[@sha256:HEX] (a tag alone
    /// is resolved to the digest it names now), or https://... with --digest
    pub(crate) source: String,
    /// The pin: the .wasm file's SHA-256 (https://) or the manifest's
    /// (oci://, instead of @sha256:... in the reference)
    #[arg(long, value_name = "sha256:HEX")]
    pub(crate) digest: Option<String>,
    /// A cosign public key (PEM, ECDSA P-256 or Ed25519) whose signature the
    /// source must carry
    #[arg(long, value_name = "PEM")]
    pub(crate) key: Option<PathBuf>,
    /// A keyless signer's identity (its certificate's subject alternative
    /// name), with --issuer and --trusted-root
    #[arg(long, value_name = "IDENTITY")]
    pub(crate) identity: Option<String>,
    /// The OIDC issuer that vouched for --identity
    #[arg(long, value_name = "URL")]
    pub(crate) issuer: Option<String>,
    /// sigstore's trusted_root.json that keyless signatures are verified
    /// against
    #[arg(long = "trusted-root", value_name = "JSON")]
    pub(crate) trusted_root: Option<PathBuf>,
    /// An https:// plugin's sigstore bundle (a URL or a file), if it is not
    /// at the plugin's URL with .sigstore.json added
    #[arg(long, value_name = "URL|FILE")]
    pub(crate) bundle: Option<String>,
    /// A PEM file of the certificate authorities to trust for this source
    /// instead of the built-in roots
    #[arg(long = "ca-file", value_name = "PEM")]
    pub(crate) ca_file: Option<PathBuf>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args { source, digest, key, identity, issuer, trusted_root, bundle, ca_file, json } = args;
    let mut verify = serde_json::Map::new();
    if let Some(key) = key {
        verify.insert("key".to_owned(), json!(key));
    }
    for (member, value) in [
        ("identity", identity.map(|i| json!(i))),
        ("issuer", issuer.map(|i| json!(i))),
        ("trustedRoot", trusted_root.map(|r| json!(r))),
        ("bundle", bundle.map(|b| json!(b))),
    ] {
        if let Some(value) = value {
            verify.insert(member.to_owned(), value);
        }
    }
    let runtime = crate::runtime();
    // A tag without a digest: what the registry says it names now, then
    // pulled by that digest like any pin.
    let oci = source.to_ascii_lowercase().starts_with("oci://");
    let resolved = if oci && digest.is_none() && !source.contains('@') {
        let found = runtime.resolve_oci_tag(&source, ca_file.as_deref()).await.map_err(|e| Failure {
            code: exit::PLUGIN_FAILED,
            error: anyhow::Error::from(e).context("cannot resolve the tag to a digest"),
        })?;
        Some(found.to_string())
    } else {
        None
    };
    let plugin = remote_plugin(&source, digest.or_else(|| resolved.clone()), verify, ca_file.as_ref()).await?;
    let fetched = runtime.fetch_plugin(&plugin, "source").await?;
    let module = toolhost::Sha256Digest::of(&fetched.wasm);
    let signer = fetched.signer.as_ref().map(ToString::to_string);
    if json {
        print_json(&json!({
            "source": plugin.url,
            "digest": plugin.digest.to_string(),
            "tagResolved": resolved.is_some(),
            "module": {"digest": module.to_string(), "bytes": fetched.wasm.len()},
            "signedBy": signer,
            "fromCache": fetched.from_cache,
        }))?;
        return Ok(0);
    }
    let mut rows = vec![
        ["source".to_owned(), plugin.url.clone()],
        [
            "digest".to_owned(),
            match &resolved {
                Some(_) => format!("{} (the tag names it now: pin it)", plugin.digest),
                None => plugin.digest.to_string(),
            },
        ],
        ["module".to_owned(), format!("{module} ({} bytes)", fetched.wasm.len())],
        [
            "signed by".to_owned(),
            signer.unwrap_or_else(|| "not checked (give --key, or --identity, --issuer and --trusted-root)".to_owned()),
        ],
    ];
    if fetched.from_cache {
        rows.push(["fetched".to_owned(), "from the download cache, checked again".to_owned()]);
    }
    for [name, value] in rows {
        println!("{name:<10} {}", crate::terminal::escaped(&value));
    }
    Ok(0)
}

/// The source as a toolsets file's `server` would give it, read by the
/// same rules (a pin required, `http://` refused, the key's kind checked).
async fn remote_plugin(
    url: &str,
    digest: Option<String>,
    verify: serde_json::Map<String, serde_json::Value>,
    ca_file: Option<&PathBuf>,
) -> Result<toolhost::RemotePlugin, Failure> {
    let mut server = json!({"url": url});
    if let Some(digest) = digest {
        server["digest"] = json!(digest);
    }
    if !verify.is_empty() {
        server["verify"] = serde_json::Value::Object(verify);
    }
    if let Some(ca_file) = ca_file {
        server["caFile"] = json!(ca_file);
    }
    let document =
        json!({"schema": "toolhost verify", "toolsets": [{"id": "source", "kind": "uri", "server": server}]});
    // Relative paths are the working directory's.
    let here = std::env::current_dir().map_err(|e| usage(anyhow::anyhow!("no working directory: {e}")))?;
    let parsed = toolhost::parse_toolsets(&here.join("toolhost-verify"), &document, &toolhost::NoSecrets).await;
    let file = parsed.map_err(|error| {
        let problems: Vec<String> = error
            .problems
            .iter()
            .map(|p| {
                let member = p.pointer.rsplit('/').next().unwrap_or_default();
                format!("{}: {}", flag_of(member), p.message)
            })
            .collect();
        usage(anyhow::anyhow!("{}", problems.join("; ")))
    })?;
    match file.toolsets.into_iter().next().and_then(|toolset| toolset.source) {
        Some(toolhost::PluginSource::Https(plugin) | toolhost::PluginSource::Oci(plugin)) => Ok(plugin),
        _ => Err(usage(anyhow::anyhow!(
            "`{}` is a local file, used as it is: verify checks downloaded plugins (oci://, https://)",
            crate::terminal::escaped(url)
        ))),
    }
}

/// The flag (or argument) a `server` member came from.
fn flag_of(member: &str) -> &str {
    match member {
        "digest" => "--digest",
        "key" => "--key",
        "bundle" => "--bundle",
        "verify" => "--key, --identity, --issuer, --trusted-root",
        "caFile" => "--ca-file",
        _ => "SOURCE",
    }
}
