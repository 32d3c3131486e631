//! Sigstore bundles (`*.sigstore.json`, as `cosign sign-blob --bundle`
//! writes them): the signature of a file, with what verifies it.
//!
//! ```json
//! {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
//!  "verificationMaterial": {
//!    "certificate": {"rawBytes": "<base64 DER>"},
//!    "tlogEntries": [{"logIndex": "7", "logId": {"keyId": "<base64>"},
//!                     "integratedTime": "1700000000",
//!                     "inclusionPromise": {"signedEntryTimestamp": "<base64>"},
//!                     "canonicalizedBody": "<base64>"}]},
//!  "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": "<base64>"},
//!                       "signature": "<base64>"}}
//! ```
//!
//! A key's bundle has `publicKey` (a hint) instead of `certificate`, and
//! may have no log entry: the key is what is trusted. Versions 0.1 and 0.2
//! give the certificate as `x509CertificateChain` (the leaf first). A
//! bundle of an attestation (`dsseEnvelope`) signs no file and is refused.

use serde::{Deserialize, Deserializer};
use spki::der::Decode as _;
use x509_cert::Certificate;

use super::keyless::{LogEntry, base64};

/// What a bundle says: a signature, the digest it signs, the certificate
/// that made it and the log entry that dates it (keyless).
pub(super) struct Bundle {
    pub(super) signature: Vec<u8>,
    /// The SHA-256 the bundle says was signed, if it says.
    pub(super) digest: Option<Vec<u8>>,
    pub(super) certificate: Option<Certificate>,
    pub(super) entry: Option<Result<LogEntry, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    media_type: String,
    verification_material: Material,
    #[serde(default)]
    message_signature: Option<MessageSignature>,
    #[serde(default)]
    dsse_envelope: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Material {
    #[serde(default)]
    certificate: Option<RawBytes>,
    #[serde(default)]
    x509_certificate_chain: Option<Chain>,
    #[serde(default)]
    tlog_entries: Vec<TlogEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytes {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct Chain {
    certificates: Vec<RawBytes>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TlogEntry {
    #[serde(deserialize_with = "int64")]
    log_index: i64,
    log_id: LogId,
    #[serde(deserialize_with = "int64")]
    integrated_time: i64,
    #[serde(default)]
    inclusion_promise: Option<Promise>,
    canonicalized_body: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogId {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Promise {
    signed_entry_timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageSignature {
    #[serde(default)]
    message_digest: Option<MessageDigest>,
    signature: String,
}

#[derive(Deserialize)]
struct MessageDigest {
    algorithm: String,
    digest: String,
}

/// An int64 as protobuf's JSON writes it (a string), or a number.
fn int64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Number(i64),
        Text(String),
    }
    match Int::deserialize(deserializer)? {
        Int::Number(n) => Ok(n),
        Int::Text(text) => text.parse().map_err(serde::de::Error::custom),
    }
}

impl Bundle {
    /// A bundle's bytes, read; else what is wrong with them.
    pub(super) fn read(bytes: &[u8]) -> Result<Bundle, String> {
        let raw: Raw =
            serde_json::from_slice(bytes).map_err(|e| format!("the bundle is not a sigstore bundle: {e}"))?;
        if !raw.media_type.starts_with("application/vnd.dev.sigstore.bundle") {
            return Err("the bundle is not a sigstore bundle (its mediaType)".to_owned());
        }
        if raw.dsse_envelope.is_some() {
            return Err("the bundle holds an attestation (a DSSE envelope), not a signature of the file".to_owned());
        }
        let signed = raw.message_signature.ok_or("the bundle has no messageSignature")?;
        let signature = base64(&signed.signature).map_err(|e| format!("the bundle's signature is {e}"))?;
        let digest = match signed.message_digest {
            Some(digest) if digest.algorithm == "SHA2_256" => {
                Some(base64(&digest.digest).map_err(|e| format!("the bundle's message digest is {e}"))?)
            }
            Some(digest) => {
                let algorithm: String = digest.algorithm.chars().take(40).collect();
                return Err(format!("the bundle's message digest is {algorithm}, not SHA2_256"));
            }
            None => None,
        };
        let material = raw.verification_material;
        let leaf = material
            .certificate
            .or_else(|| material.x509_certificate_chain.and_then(|c| c.certificates.into_iter().next()));
        let certificate = leaf
            .map(|leaf| {
                base64(&leaf.raw_bytes)
                    .and_then(|der| Certificate::from_der(&der).map_err(|e| e.to_string()))
                    .map_err(|e| format!("the bundle's certificate does not read: {e}"))
            })
            .transpose()?;
        let entry = material.tlog_entries.into_iter().next().map(|entry| {
            let promise =
                entry.inclusion_promise.ok_or("its log entry has no signed entry timestamp (inclusionPromise)")?;
            let log_id = base64(&entry.log_id.key_id).map_err(|e| format!("its log id is {e}"))?;
            Ok(LogEntry {
                body: entry.canonicalized_body,
                integrated_time: entry.integrated_time,
                log_index: entry.log_index,
                log_id: log_id.iter().map(|b| format!("{b:02x}")).collect(),
                timestamp: base64(&promise.signed_entry_timestamp)
                    .map_err(|e| format!("its signed entry timestamp is {e}"))?,
            })
        });
        Ok(Bundle { signature, digest, certificate, entry })
    }
}
