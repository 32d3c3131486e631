//! Cosign signatures of OCI artifacts, checked with a public key.
//!
//! `cosign sign --key` stores a signature of `repository@sha256:D` in the
//! same repository under the tag `sha256-D.sig`: an image manifest whose
//! layers are simple-signing payloads
//! (`application/vnd.dev.cosign.simplesigning.v1+json`), each signed in
//! its `dev.cosignproject.cosign/signature` annotation (base64). The
//! payload names what was signed:
//!
//! ```json
//! {"critical": {"identity": {"docker-reference": "registry/repository"},
//!               "image": {"docker-manifest-digest": "sha256:D"},
//!               "type": "cosign container image signature"},
//!  "optional": null}
//! ```
//!
//! A plugin is verified when one payload's signature verifies with the key
//! and that payload names the pinned digest. The signature is over the
//! payload's bytes as stored: ECDSA P-256 with SHA-256 (DER-encoded), or
//! Ed25519 over the bytes themselves. ring checks both (it is already the
//! TLS clients' provider); `spki` reads the PEM key.

use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;
use spki::der::DecodePem as _;
use spki::der::Encode as _;

use super::keyless::{self, Keyless};
use super::{Sha256Digest, Signer, SourceError, Verification};

/// The media type of a cosign signature layer.
pub(super) const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the signature.
pub(super) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What a payload's `critical.type` says.
const COSIGN_TYPE: &str = "cosign container image signature";
/// A key file is this small (a PEM P-256 key is 178 bytes).
const MAX_KEY_FILE_BYTES: u64 = 16 << 10;
/// A signature is this small once decoded (ECDSA P-256: at most 72 bytes).
const MAX_SIGNATURE_BYTES: usize = 1024;

/// `id-ecPublicKey` (RFC 5480).
const EC_PUBLIC_KEY: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// The P-256 curve, `prime256v1` (RFC 5480).
const P256: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
/// `id-Ed25519` (RFC 8410).
const ED25519: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.101.112");

/// A public key a signature is checked with.
pub(super) struct PublicKey {
    algorithm: &'static dyn ring::signature::VerificationAlgorithm,
    /// The key itself (the SubjectPublicKeyInfo's bit string).
    raw: Vec<u8>,
    /// The SHA-256 of the DER SubjectPublicKeyInfo.
    fingerprint: Sha256Digest,
}

impl PublicKey {
    /// The key in a PEM file; else what is wrong with it.
    pub(super) fn read(path: &Path) -> Result<PublicKey, String> {
        use std::io::Read as _;
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let mut pem = String::new();
        file.take(MAX_KEY_FILE_BYTES + 1).read_to_string(&mut pem).map_err(|e| e.to_string())?;
        if pem.len() as u64 > MAX_KEY_FILE_BYTES {
            return Err(format!("larger than {MAX_KEY_FILE_BYTES} bytes: not a public key"));
        }
        PublicKey::from_pem(&pem)
    }

    /// The key of a PEM `PUBLIC KEY` block; else what is wrong with it.
    pub(super) fn from_pem(pem: &str) -> Result<PublicKey, String> {
        let info = spki::SubjectPublicKeyInfoOwned::from_pem(pem.trim()).map_err(|e| {
            format!("not a PEM public key (-----BEGIN PUBLIC KEY-----, as `cosign generate-key-pair` writes): {e}")
        })?;
        let parameter = info.algorithm.parameters.as_ref().and_then(|p| p.decode_as::<spki::ObjectIdentifier>().ok());
        let algorithm: &'static dyn ring::signature::VerificationAlgorithm = match (info.algorithm.oid, parameter) {
            (EC_PUBLIC_KEY, Some(P256)) => &ring::signature::ECDSA_P256_SHA256_ASN1,
            (ED25519, _) => &ring::signature::ED25519,
            (EC_PUBLIC_KEY, curve) => {
                return Err(format!(
                    "an ECDSA key on curve {}: toolhost verifies ECDSA P-256 and Ed25519 keys",
                    curve.map_or("(unnamed)".to_owned(), |c| c.to_string())
                ));
            }
            (other, _) => {
                return Err(format!("a key of algorithm {other}: toolhost verifies ECDSA P-256 and Ed25519 keys"));
            }
        };
        let der = info.to_der().map_err(|e| format!("cannot encode the key again: {e}"))?;
        let raw = info.subject_public_key.raw_bytes().to_vec();
        Ok(PublicKey { algorithm, raw, fingerprint: Sha256Digest::of(&der) })
    }

    /// Who holds the private half.
    pub(super) fn signer(&self) -> Signer {
        Signer::Key { fingerprint: self.fingerprint.to_string() }
    }

    /// The fingerprint's hex digits (names the cache's note).
    pub(super) fn fingerprint_hex(&self) -> String {
        self.fingerprint.hex()
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        ring::signature::UnparsedPublicKey::new(self.algorithm, &self.raw).verify(message, signature).is_ok()
    }
}

/// What a signature is checked with: a key, or a keyless identity.
pub(super) enum Verifier {
    Key(PublicKey),
    Keyless(Keyless),
}

impl Verifier {
    /// The verifier `verify` asks for, its files read; `url` names the
    /// source in the error.
    pub(super) fn of(verify: &Verification, url: &str) -> Result<Verifier, SourceError> {
        let refuse = |member: &'static str, path: &Path, message: String| SourceError::VerifyFile {
            url: url.to_owned(),
            member,
            path: path.to_owned(),
            message,
        };
        match verify {
            Verification::Key(path) => {
                PublicKey::read(path).map(Verifier::Key).map_err(|message| refuse("key", path, message))
            }
            Verification::Keyless { identity, issuer, trusted_root } => Keyless::read(identity, issuer, trusted_root)
                .map(Verifier::Keyless)
                .map_err(|message| refuse("trustedRoot", trusted_root, message)),
        }
    }

    /// Names the cache's note of what verified with this verifier.
    pub(super) fn fingerprint_hex(&self) -> String {
        match self {
            Verifier::Key(key) => key.fingerprint_hex(),
            Verifier::Keyless(keyless) => keyless.fingerprint_hex(),
        }
    }

    /// Who signed what this verifier verified.
    pub(super) fn signer(&self) -> Signer {
        match self {
            Verifier::Key(key) => key.signer(),
            Verifier::Keyless(keyless) => {
                Signer::Identity { identity: keyless.identity.clone(), issuer: keyless.issuer.clone() }
            }
        }
    }

    /// Whether a signature layer (its annotations, its payload) is a
    /// signature of `digest` this verifier accepts; else what did not match.
    pub(super) fn check_layer(
        &self,
        annotations: &std::collections::BTreeMap<String, String>,
        payload: &[u8],
        digest: &Sha256Digest,
    ) -> Result<(), String> {
        let signature =
            annotations.get(SIGNATURE_ANNOTATION).ok_or(format!("it has no {SIGNATURE_ANNOTATION} annotation"))?;
        let signature = base64::engine::general_purpose::STANDARD
            .decode(signature.trim())
            .map_err(|_| "its signature annotation is not base64".to_owned())?;
        if signature.len() > MAX_SIGNATURE_BYTES {
            return Err(format!("its signature is longer than {MAX_SIGNATURE_BYTES} bytes"));
        }
        match self {
            Verifier::Key(key) => {
                if !key.verifies(payload, &signature) {
                    return Err(format!("its signature does not verify with key {}", key.fingerprint));
                }
            }
            Verifier::Keyless(keyless) => keyless.check(
                payload,
                &signature,
                annotations.get(keyless::CERTIFICATE_ANNOTATION).map(String::as_str),
                annotations.get(keyless::BUNDLE_ANNOTATION).map(String::as_str),
            )?,
        }
        // Signed: now what the payload says is the signer's.
        check_payload(payload, digest)
    }
}

/// The tag cosign stores the signatures of `digest` under.
pub(super) fn signature_tag(digest: &Sha256Digest) -> String {
    format!("sha256-{}.sig", digest.hex())
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

/// Whether a (verified) payload is a cosign image signature of `digest`;
/// else what it is.
fn check_payload(payload: &[u8], digest: &Sha256Digest) -> Result<(), String> {
    let payload: Payload =
        serde_json::from_slice(payload).map_err(|e| format!("it is not a cosign simple-signing payload: {e}"))?;
    if payload.critical.kind != COSIGN_TYPE {
        return Err(format!("its payload's type is not `{COSIGN_TYPE}`"));
    }
    match payload.critical.image.digest.parse::<Sha256Digest>() {
        Ok(signed) if signed == *digest => Ok(()),
        Ok(signed) => Err(format!("it signs manifest {signed}, not {digest}")),
        Err(_) => Err("it signs a manifest digest that is not sha256:<64 hex digits>".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use ring::rand::SystemRandom;
    use ring::signature::KeyPair as _;

    use super::*;

    /// A PEM public key of a SubjectPublicKeyInfo header and a raw key.
    fn pem(header: &str, raw: &[u8]) -> String {
        let der: Vec<u8> =
            (0..header.len()).step_by(2).map(|i| u8::from_str_radix(&header[i..i + 2], 16).unwrap()).collect();
        let body = base64::engine::general_purpose::STANDARD.encode([der.as_slice(), raw].concat());
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"))
    }

    fn payload(digest: &Sha256Digest) -> Vec<u8> {
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"r/p"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"{COSIGN_TYPE}"}},"optional":null}}"#
        )
        .into_bytes()
    }

    fn base64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A layer signed with `signature` (base64), checked.
    fn check(verifier: &Verifier, payload: &[u8], signature: &str, digest: &Sha256Digest) -> Result<(), String> {
        let annotations = [(SIGNATURE_ANNOTATION.to_owned(), signature.to_owned())].into();
        verifier.check_layer(&annotations, payload, digest)
    }

    #[test]
    fn a_p256_and_an_ed25519_signature_verify_and_name_their_digest() {
        let rng = SystemRandom::new();
        let digest = Sha256Digest::of(b"manifest");
        let other = Sha256Digest::of(b"another manifest");
        // ECDSA P-256: the uncompressed point after the SPKI header.
        let pkcs8 =
            ring::signature::EcdsaKeyPair::generate_pkcs8(&ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
                .unwrap();
        let ecdsa = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            pkcs8.as_ref(),
            &rng,
        )
        .unwrap();
        let p256 = Verifier::Key(
            PublicKey::from_pem(&pem(
                "3059301306072a8648ce3d020106082a8648ce3d030107034200",
                ecdsa.public_key().as_ref(),
            ))
            .unwrap(),
        );
        // Ed25519: the 32-byte key after its header.
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let ed = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let ed25519 =
            Verifier::Key(PublicKey::from_pem(&pem("302a300506032b6570032100", ed.public_key().as_ref())).unwrap());

        let signed = payload(&digest);
        let by_p256 = base64(ecdsa.sign(&rng, &signed).unwrap().as_ref());
        let by_ed25519 = base64(ed.sign(&signed).as_ref());
        assert_eq!(check(&p256, &signed, &by_p256, &digest), Ok(()));
        assert_eq!(check(&ed25519, &signed, &by_ed25519, &digest), Ok(()));
        // The other key, the other digest, a changed payload, no base64.
        let error = check(&p256, &signed, &by_ed25519, &digest).unwrap_err();
        assert!(error.contains("does not verify with key sha256:"), "{error}");
        let error = check(&p256, &signed, &by_p256, &other).unwrap_err();
        assert_eq!(error, format!("it signs manifest {digest}, not {other}"));
        let mut changed = signed.clone();
        changed[0] = b' ';
        assert!(check(&p256, &changed, &by_p256, &digest).is_err());
        assert!(check(&p256, &signed, "%%%", &digest).unwrap_err().contains("not base64"));
        // A signed payload of another type is not a signature of an image.
        let typed = String::from_utf8(signed).unwrap().replace(COSIGN_TYPE, "something else").into_bytes();
        let signature = base64(ed.sign(&typed).as_ref());
        assert!(check(&ed25519, &typed, &signature, &digest).unwrap_err().contains("type"));
        assert_ne!(p256.fingerprint_hex(), ed25519.fingerprint_hex());
    }

    #[test]
    fn keys_of_other_algorithms_are_refused_naming_them() {
        let rsa = "-----BEGIN PUBLIC KEY-----\nMFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAMQrDhjz8snK8jE/wSga3gfdYn5aQrzU\nY/Wh06JpbogjZOte0w8CWUVQgIf9iAJJ0xuVhx3lS3QJgPgQFOCVDukCAwEAAQ==\n-----END PUBLIC KEY-----\n";
        let error = PublicKey::from_pem(rsa).err().expect("refused");
        assert!(error.contains("1.2.840.113549.1.1.1") && error.contains("P-256 and Ed25519"), "{error}");
        let p384 = "-----BEGIN PUBLIC KEY-----\nMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEdT+ZsfgcIhfkk/0SQVPgnU3azUTQyNEI\n07NHG5uEZlGIKa87ruV6B+Fi5nEwkrMZ9Vm0fIQWPT4zY0Zkf1Kp9mFj/mZpPURM\nRoy6p7Vo3Qseh5nZL85U7rj17nqKFIdi\n-----END PUBLIC KEY-----\n";
        let error = PublicKey::from_pem(p384).err().expect("refused");
        assert!(error.contains("curve 1.3.132.0.34"), "{error}");
        let error = PublicKey::from_pem("not a key").err().expect("refused");
        assert!(error.contains("not a PEM public key"), "{error}");
    }
}
