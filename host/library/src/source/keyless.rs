//! Keyless cosign signatures: a short-lived certificate from a Fulcio CA
//! names the signer (its subject alternative name) and the OIDC issuer
//! that vouched for it, and Rekor's signed entry timestamp says the
//! signature was logged while the certificate was valid.
//!
//! `cosign sign` (keyless) stores, beside the signature annotation of each
//! layer (see `signature.rs`), the leaf certificate
//! (`dev.sigstore.cosign/certificate`, PEM), its chain
//! (`dev.sigstore.cosign/chain`) and Rekor's bundle
//! (`dev.sigstore.cosign/bundle`):
//!
//! ```json
//! {"SignedEntryTimestamp": "<base64>",
//!  "Payload": {"body": "<base64 entry>", "integratedTime": 1700000000,
//!              "logIndex": 123, "logID": "<hex SHA-256 of the log's key>"}}
//! ```
//!
//! Everything is checked offline against a trusted root file
//! (sigstore's `trusted_root.json`: the Fulcio chains and the Rekor keys):
//!
//! 1. the signed entry timestamp verifies with the key of the log the
//!    bundle names, over the payload in canonical JSON;
//! 2. the entry (a `hashedrekord`) holds this signature, this certificate
//!    and the SHA-256 of this payload;
//! 3. the certificate was issued by one of the root's chains, every link's
//!    signature verifying and every certificate valid when the entry was
//!    logged; the leaf is for code signing;
//! 4. its subject alternative name is the identity and its issuer
//!    extension the issuer the operator named, exactly;
//! 5. the payload's signature verifies with the certificate's key.
//!
//! The chain the signature carries is not needed: the root file's are
//! the ones trusted.

use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;
use spki::der::{Decode as _, DecodePem as _, Encode as _};
use x509_cert::Certificate;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{BasicConstraints, ExtendedKeyUsage, SubjectAltName};

use super::Sha256Digest;

/// The layer annotation holding the leaf certificate (PEM).
#[cfg(feature = "oci")]
pub(super) const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation holding Rekor's bundle.
#[cfg(feature = "oci")]
pub(super) const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
/// A trusted root file is this small (sigstore's is about 8 KiB).
const MAX_ROOT_FILE_BYTES: u64 = 1 << 20;
/// Fulcio's OIDC issuer extension, a DER UTF8String.
const ISSUER_V2: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
/// Its first form, the issuer's bytes themselves.
const ISSUER_V1: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
const EXTENDED_KEY_USAGE: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("2.5.29.37");
const SUBJECT_ALT_NAME: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("2.5.29.17");
const BASIC_CONSTRAINTS: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("2.5.29.19");
const CODE_SIGNING: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
/// `id-ecPublicKey` (RFC 5480).
pub(super) const EC_PUBLIC_KEY: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// The P-256 curve, `prime256v1` (RFC 5480).
pub(super) const P256: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
/// The P-384 curve, `secp384r1` (RFC 5480).
const P384: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.132.0.34");
/// `id-Ed25519` (RFC 8410).
pub(super) const ED25519: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.101.112");
const ECDSA_SHA256: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");

/// What a keyless signature must show: who signed, vouched for by whom,
/// under which roots.
pub(super) struct Keyless {
    pub(super) identity: String,
    pub(super) issuer: String,
    root: TrustedRoot,
    /// The SHA-256 of the identity, the issuer and the root file: names the
    /// cache's note of what verified.
    fingerprint: Sha256Digest,
}

/// sigstore's `trusted_root.json`: the parts verification reads.
struct TrustedRoot {
    authorities: Vec<Authority>,
    logs: Vec<Log>,
}

/// A certificate authority's chain, issuing certificate first.
struct Authority {
    chain: Vec<Certificate>,
    valid: Window,
}

/// A transparency log's key.
struct Log {
    key: Key,
    /// The log's id: `logId.keyId`, else the SHA-256 of its DER
    /// SubjectPublicKeyInfo.
    id: Vec<u8>,
    valid: Window,
}

/// Seconds since the epoch, from and until (either open).
#[derive(Clone, Copy)]
struct Window {
    start: Option<i64>,
    end: Option<i64>,
}

impl Window {
    fn holds(&self, time: i64) -> bool {
        self.start.is_none_or(|start| start <= time) && self.end.is_none_or(|end| time <= end)
    }
}

/// A public key and the curve (or algorithm) it is on.
struct Key {
    algorithm: spki::ObjectIdentifier,
    curve: Option<spki::ObjectIdentifier>,
    raw: Vec<u8>,
}

impl Key {
    fn of(info: &spki::SubjectPublicKeyInfoOwned) -> Key {
        let curve = info.algorithm.parameters.as_ref().and_then(|p| p.decode_as::<spki::ObjectIdentifier>().ok());
        Key { algorithm: info.algorithm.oid, curve, raw: info.subject_public_key.raw_bytes().to_vec() }
    }

    /// Whether `signature` (made with `hash`, an ECDSA signature
    /// algorithm's OID; none for Ed25519) of `message` verifies.
    fn verifies(&self, hash: Option<spki::ObjectIdentifier>, message: &[u8], signature: &[u8]) -> bool {
        use ring::signature as s;
        let algorithm: &'static dyn s::VerificationAlgorithm = match (self.algorithm, self.curve, hash) {
            (ED25519, _, _) => &s::ED25519,
            (EC_PUBLIC_KEY, Some(P256), Some(ECDSA_SHA256) | None) => &s::ECDSA_P256_SHA256_ASN1,
            (EC_PUBLIC_KEY, Some(P256), Some(ECDSA_SHA384)) => &s::ECDSA_P256_SHA384_ASN1,
            (EC_PUBLIC_KEY, Some(P384), Some(ECDSA_SHA384) | None) => &s::ECDSA_P384_SHA384_ASN1,
            (EC_PUBLIC_KEY, Some(P384), Some(ECDSA_SHA256)) => &s::ECDSA_P384_SHA256_ASN1,
            _ => return false,
        };
        s::UnparsedPublicKey::new(algorithm, &self.raw).verify(message, signature).is_ok()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootFile {
    #[serde(default)]
    tlogs: Vec<RootLog>,
    #[serde(default)]
    certificate_authorities: Vec<RootAuthority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootLog {
    public_key: RootKey,
    /// The id entries name the log by; the SHA-256 of its key if absent
    /// (a Rekor v2 log's id is its checkpoint key's, another hash).
    #[serde(default)]
    log_id: Option<RootLogId>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootLogId {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootKey {
    raw_bytes: String,
    #[serde(default)]
    valid_for: Option<RootWindow>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootAuthority {
    cert_chain: RootChain,
    #[serde(default)]
    valid_for: Option<RootWindow>,
}

#[derive(Deserialize)]
struct RootChain {
    certificates: Vec<RootCertificate>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootCertificate {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct RootWindow {
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
}

pub(super) fn base64(text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(|_| "not base64".to_owned())
}

/// An RFC 3339 time (`2021-01-12T11:53:27.000Z`) as seconds since the epoch.
fn rfc3339(text: &str) -> Result<i64, String> {
    let refuse = || format!("`{}` is not an RFC 3339 time", text.chars().take(40).collect::<String>());
    let (date, rest) = text.split_once('T').ok_or_else(refuse)?;
    let mut parts = date.splitn(3, '-').map(|p| p.parse::<i64>().map_err(|_| refuse()));
    let (year, month, day) =
        (parts.next().ok_or_else(refuse)??, parts.next().ok_or_else(refuse)??, parts.next().ok_or_else(refuse)??);
    let clock = rest.trim_end_matches('Z');
    let clock = clock.split(['.', '+']).next().unwrap_or_default();
    let mut parts = clock.splitn(3, ':').map(|p| p.parse::<i64>().map_err(|_| refuse()));
    let (hour, minute, second) =
        (parts.next().ok_or_else(refuse)??, parts.next().ok_or_else(refuse)??, parts.next().ok_or_else(refuse)??);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(refuse());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Ok(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

fn window(valid: Option<&RootWindow>) -> Result<Window, String> {
    let read = |time: Option<&String>| time.map(|t| rfc3339(t)).transpose();
    Ok(match valid {
        Some(valid) => Window { start: read(valid.start.as_ref())?, end: read(valid.end.as_ref())? },
        None => Window { start: None, end: None },
    })
}

impl Keyless {
    /// The verification of `identity` vouched for by `issuer`, under the
    /// trusted root file at `root`; else what is wrong with the file.
    pub(super) fn read(identity: &str, issuer: &str, root: &Path) -> Result<Keyless, String> {
        use std::io::Read as _;
        let file = std::fs::File::open(root).map_err(|e| e.to_string())?;
        let mut text = Vec::new();
        file.take(MAX_ROOT_FILE_BYTES + 1).read_to_end(&mut text).map_err(|e| e.to_string())?;
        if text.len() as u64 > MAX_ROOT_FILE_BYTES {
            return Err(format!("larger than {MAX_ROOT_FILE_BYTES} bytes: not a trusted root"));
        }
        Keyless::of_root(identity, issuer, &text)
    }

    /// [`Keyless::read`] of a trusted root's bytes, read already.
    pub(super) fn of_root(identity: &str, issuer: &str, text: &[u8]) -> Result<Keyless, String> {
        let fingerprint = Sha256Digest::of(&[identity.as_bytes(), b"\n", issuer.as_bytes(), b"\n", text].concat());
        let file: RootFile = serde_json::from_slice(text).map_err(|e| format!("not a sigstore trusted root: {e}"))?;
        let mut authorities = Vec::new();
        for (n, authority) in file.certificate_authorities.iter().enumerate() {
            let chain = authority
                .cert_chain
                .certificates
                .iter()
                .map(|c| base64(&c.raw_bytes).and_then(|der| Certificate::from_der(&der).map_err(|e| e.to_string())))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("certificateAuthorities[{n}]: a certificate that does not read: {e}"))?;
            if chain.is_empty() {
                return Err(format!("certificateAuthorities[{n}] has no certificate"));
            }
            let valid =
                window(authority.valid_for.as_ref()).map_err(|e| format!("certificateAuthorities[{n}]: {e}"))?;
            authorities.push(Authority { chain, valid });
        }
        let mut logs = Vec::new();
        for (n, log) in file.tlogs.iter().enumerate() {
            let der = base64(&log.public_key.raw_bytes).map_err(|e| format!("tlogs[{n}]: the key is {e}"))?;
            let info = spki::SubjectPublicKeyInfoOwned::from_der(&der)
                .map_err(|e| format!("tlogs[{n}]: not a public key: {e}"))?;
            let valid = window(log.public_key.valid_for.as_ref()).map_err(|e| format!("tlogs[{n}]: {e}"))?;
            let id = match &log.log_id {
                Some(id) => base64(&id.key_id).map_err(|e| format!("tlogs[{n}]: the log id is {e}"))?,
                None => Sha256Digest::of(&der).as_bytes().to_vec(),
            };
            logs.push(Log { key: Key::of(&info), id, valid });
        }
        if authorities.is_empty() || logs.is_empty() {
            return Err("a trusted root needs certificateAuthorities (Fulcio's) and tlogs (Rekor's)".to_owned());
        }
        Ok(Keyless {
            identity: identity.to_owned(),
            issuer: issuer.to_owned(),
            root: TrustedRoot { authorities, logs },
            fingerprint,
        })
    }

    /// Names the cache's note of what verified.
    pub(super) fn fingerprint_hex(&self) -> String {
        self.fingerprint.hex()
    }

    /// Whether `signature` of `payload`, made with the certificate in
    /// `certificate` (PEM) and logged as `bundle` (Rekor's, as cosign
    /// stores it beside an OCI signature) says, is the identity's; else
    /// what did not match.
    #[cfg(feature = "oci")]
    pub(super) fn check(
        &self,
        payload: &[u8],
        signature: &[u8],
        certificate: Option<&str>,
        bundle: Option<&str>,
    ) -> Result<(), String> {
        let certificate = certificate.ok_or(format!("it has no certificate ({CERTIFICATE_ANNOTATION})"))?;
        let leaf =
            Certificate::from_pem(certificate.trim()).map_err(|e| format!("its certificate does not read: {e}"))?;
        let bundle = bundle.ok_or(format!("it has no transparency log entry ({BUNDLE_ANNOTATION})"))?;
        self.check_logged(payload, signature, &leaf, &LogEntry::of_cosign_bundle(bundle)?)
    }

    /// Whether `signature` of `payload`, made with `leaf`'s key and logged
    /// as `entry` says, is the identity's; else what did not match.
    pub(super) fn check_logged(
        &self,
        payload: &[u8],
        signature: &[u8],
        leaf: &Certificate,
        entry: &LogEntry,
    ) -> Result<(), String> {
        let leaf_der = leaf.to_der().map_err(|e| e.to_string())?;
        let logged = self.logged(entry)?;
        check_entry(&logged.body, payload, signature, &leaf_der)?;
        self.issued(leaf, logged.time)?;
        self.names(leaf)?;
        let key = Key::of(&leaf.tbs_certificate.subject_public_key_info);
        if !key.verifies(None, payload, signature) {
            return Err("its signature does not verify with its certificate's key".to_owned());
        }
        Ok(())
    }

    /// The entry a signed entry timestamp vouches for, and when it was
    /// logged.
    fn logged(&self, entry: &LogEntry) -> Result<Logged, String> {
        let log = self
            .root
            .logs
            .iter()
            .find(|log| hex(&log.id) == entry.log_id.to_ascii_lowercase())
            .ok_or("its entry is in a transparency log the trusted root does not have")?;
        // The signed entry timestamp is over the entry as canonical JSON:
        // members in order, no spaces.
        let canonical = format!(
            "{{\"body\":{},\"integratedTime\":{},\"logID\":{},\"logIndex\":{}}}",
            serde_json::to_string(&entry.body).map_err(|e| e.to_string())?,
            entry.integrated_time,
            serde_json::to_string(&entry.log_id).map_err(|e| e.to_string())?,
            entry.log_index
        );
        if !log.key.verifies(Some(ECDSA_SHA256), canonical.as_bytes(), &entry.timestamp) {
            return Err("its signed entry timestamp does not verify with the log's key".to_owned());
        }
        if !log.valid.holds(entry.integrated_time) {
            return Err("it was logged when the log's key was not valid".to_owned());
        }
        let body = base64(&entry.body).map_err(|e| format!("its log entry is {e}"))?;
        Ok(Logged { body, time: entry.integrated_time })
    }

    /// Whether one of the root's chains issued `leaf`, every certificate
    /// valid at `time`.
    fn issued(&self, leaf: &Certificate, time: i64) -> Result<(), String> {
        valid_at(leaf, time).map_err(|e| format!("its certificate {e}"))?;
        let code_signing = extension::<ExtendedKeyUsage>(leaf, EXTENDED_KEY_USAGE)
            .is_some_and(|usage| usage.0.contains(&CODE_SIGNING));
        if !code_signing {
            return Err("its certificate is not for code signing".to_owned());
        }
        let mut why = "no certificate authority of the trusted root issued its certificate".to_owned();
        for authority in &self.root.authorities {
            if !authority.valid.holds(time) {
                continue;
            }
            match chain_issues(&authority.chain, leaf, time) {
                Ok(()) => return Ok(()),
                Err(reason) => why = reason,
            }
        }
        Err(why)
    }

    /// Whether the certificate names the identity and the issuer.
    fn names(&self, leaf: &Certificate) -> Result<(), String> {
        let names: Vec<String> = extension::<SubjectAltName>(leaf, SUBJECT_ALT_NAME)
            .map(|names| {
                names
                    .0
                    .into_iter()
                    .filter_map(|name| match name {
                        GeneralName::Rfc822Name(name) | GeneralName::UniformResourceIdentifier(name) => {
                            Some(name.to_string())
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !names.contains(&self.identity) {
            return Err(format!(
                "its certificate is for {}, not {}",
                if names.is_empty() { "no identity".to_owned() } else { quoted(&names.join(", ")) },
                quoted(&self.identity)
            ));
        }
        let issuer = issuer_of(leaf).ok_or("its certificate names no OIDC issuer")?;
        if issuer != self.issuer {
            return Err(format!(
                "its certificate's identity was vouched for by {}, not {}",
                quoted(&issuer),
                quoted(&self.issuer)
            ));
        }
        Ok(())
    }
}

/// What a transparency log entry held, and when it was logged.
struct Logged {
    body: Vec<u8>,
    time: i64,
}

/// A transparency log entry as a signature carries it, with the log's
/// signed entry timestamp (its promise to include it).
pub(super) struct LogEntry {
    /// The entry, base64.
    pub(super) body: String,
    pub(super) integrated_time: i64,
    pub(super) log_index: i64,
    /// The hex SHA-256 of the log's key.
    pub(super) log_id: String,
    /// The signed entry timestamp.
    pub(super) timestamp: Vec<u8>,
}

impl LogEntry {
    /// The entry of Rekor's bundle as cosign stores it beside an OCI
    /// signature (`dev.sigstore.cosign/bundle`).
    #[cfg(feature = "oci")]
    fn of_cosign_bundle(bundle: &str) -> Result<LogEntry, String> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Bundle {
            signed_entry_timestamp: String,
            payload: BundlePayload,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct BundlePayload {
            body: String,
            integrated_time: i64,
            log_index: i64,
            #[serde(rename = "logID")]
            log_id: String,
        }
        let bundle: Bundle =
            serde_json::from_str(bundle).map_err(|e| format!("its transparency log entry does not read: {e}"))?;
        let timestamp =
            base64(&bundle.signed_entry_timestamp).map_err(|e| format!("its signed entry timestamp is {e}"))?;
        let entry = bundle.payload;
        Ok(LogEntry {
            body: entry.body,
            integrated_time: entry.integrated_time,
            log_index: entry.log_index,
            log_id: entry.log_id,
            timestamp,
        })
    }
}

/// At most 200 characters of a certificate's text, quoted.
fn quoted(text: &str) -> String {
    format!("`{}`", text.chars().take(200).collect::<String>())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the entry is a `hashedrekord` of this signature, this
/// certificate and this payload's SHA-256.
fn check_entry(body: &[u8], payload: &[u8], signature: &[u8], leaf_der: &[u8]) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Entry {
        kind: String,
        spec: Spec,
    }
    #[derive(Deserialize)]
    struct Spec {
        data: Data,
        signature: EntrySignature,
    }
    #[derive(Deserialize)]
    struct Data {
        hash: Hash,
    }
    #[derive(Deserialize)]
    struct Hash {
        algorithm: String,
        value: String,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct EntrySignature {
        content: String,
        public_key: EntryKey,
    }
    #[derive(Deserialize)]
    struct EntryKey {
        content: String,
    }
    let entry: Entry = serde_json::from_slice(body).map_err(|e| format!("its log entry does not read: {e}"))?;
    if entry.kind != "hashedrekord" {
        return Err("its log entry is not a hashedrekord".to_owned());
    }
    let hash = &entry.spec.data.hash;
    if hash.algorithm != "sha256" || hash.value != Sha256Digest::of(payload).hex() {
        return Err("its log entry is of another payload".to_owned());
    }
    if base64(&entry.spec.signature.content).ok().as_deref() != Some(signature) {
        return Err("its log entry holds another signature".to_owned());
    }
    let logged = base64(&entry.spec.signature.public_key.content)
        .ok()
        .and_then(|pem| String::from_utf8(pem).ok())
        .and_then(|pem| Certificate::from_pem(pem.trim()).ok())
        .and_then(|cert| cert.to_der().ok());
    if logged.as_deref() != Some(leaf_der) {
        return Err("its log entry holds another certificate".to_owned());
    }
    Ok(())
}

/// Whether `chain` (issuing certificate first, ending at a self-signed
/// root) issued `leaf`, every certificate valid at `time`.
fn chain_issues(chain: &[Certificate], leaf: &Certificate, time: i64) -> Result<(), String> {
    let mut child = leaf;
    for (n, issuer) in chain.iter().enumerate() {
        if child.tbs_certificate.issuer != issuer.tbs_certificate.subject || !signed_by(child, issuer) {
            return Err(if n == 0 {
                "no certificate authority of the trusted root issued its certificate".to_owned()
            } else {
                format!("the trusted root's chain is broken at certificate {n}")
            });
        }
        valid_at(issuer, time).map_err(|e| format!("a certificate of its chain {e}"))?;
        let ca = extension::<BasicConstraints>(issuer, BASIC_CONSTRAINTS).is_some_and(|c| c.ca);
        if !ca {
            return Err("a certificate of its chain is not a certificate authority".to_owned());
        }
        child = issuer;
    }
    // The chain ends at its root: a certificate that signed itself.
    if !signed_by(child, child) {
        return Err("the trusted root's chain does not end at a self-signed root".to_owned());
    }
    Ok(())
}

/// Whether `issuer`'s key verifies `certificate`'s signature.
fn signed_by(certificate: &Certificate, issuer: &Certificate) -> bool {
    let Ok(tbs) = certificate.tbs_certificate.to_der() else { return false };
    let key = Key::of(&issuer.tbs_certificate.subject_public_key_info);
    let algorithm = certificate.signature_algorithm.oid;
    let hash = (algorithm != ED25519).then_some(algorithm);
    key.verifies(hash, &tbs, certificate.signature.raw_bytes())
}

/// Whether the certificate was valid at `time`; else when it was.
fn valid_at(certificate: &Certificate, time: i64) -> Result<(), String> {
    let validity = &certificate.tbs_certificate.validity;
    let seconds = |t: x509_cert::time::Time| i64::try_from(t.to_unix_duration().as_secs()).unwrap_or(i64::MAX);
    let (from, until) = (seconds(validity.not_before), seconds(validity.not_after));
    if time < from || time > until {
        return Err(format!(
            "was valid from {} to {}, not when the signature was logged ({time}, in seconds since 1970)",
            validity.not_before, validity.not_after
        ));
    }
    Ok(())
}

/// The extension `oid` of a certificate, decoded.
fn extension<T: for<'a> spki::der::Decode<'a>>(certificate: &Certificate, oid: spki::ObjectIdentifier) -> Option<T> {
    let extensions = certificate.tbs_certificate.extensions.as_ref()?;
    let found = extensions.iter().find(|e| e.extn_id == oid)?;
    T::from_der(found.extn_value.as_bytes()).ok()
}

/// Fulcio's OIDC issuer extension: the DER UTF8String of its second form,
/// else the bytes of its first.
fn issuer_of(certificate: &Certificate) -> Option<String> {
    let extensions = certificate.tbs_certificate.extensions.as_ref()?;
    if let Some(v2) = extensions.iter().find(|e| e.extn_id == ISSUER_V2) {
        let issuer = spki::der::asn1::Utf8StringRef::from_der(v2.extn_value.as_bytes()).ok()?;
        return Some(issuer.as_str().to_owned());
    }
    let v1 = extensions.iter().find(|e| e.extn_id == ISSUER_V1)?;
    String::from_utf8(v1.extn_value.as_bytes().to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_read_as_seconds_since_the_epoch() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(rfc3339("2021-01-12T11:53:27.000Z"), Ok(1_610_452_407));
        assert_eq!(rfc3339("2000-03-01T00:00:00Z"), Ok(951_868_800));
        assert!(rfc3339("2021-13-12T11:53:27Z").is_err());
        assert!(rfc3339("yesterday").is_err());
    }
}
