//! What a downloaded plugin's signature is checked with: a public key
//! (ECDSA P-256 or Ed25519, a PEM file) or a keyless identity
//! (`keyless.rs`), and the check of a sigstore bundle of a file with it
//! (`bundle.rs`). Cosign's layout of an OCI signature is `cosign.rs`.
//! ring verifies (it is already the TLS clients' provider); `spki` reads
//! the PEM key.

use std::path::Path;

use spki::der::DecodePem as _;
use spki::der::Encode as _;

use super::keyless::{EC_PUBLIC_KEY, ED25519, Keyless, P256};
use super::{Sha256Digest, Signer, SourceError, Verification};

/// A key file is this small (a PEM P-256 key is 178 bytes).
const MAX_KEY_FILE_BYTES: u64 = 16 << 10;
/// A signature is this small once decoded (ECDSA P-256: at most 72 bytes).
pub(super) const MAX_SIGNATURE_BYTES: usize = 1024;

/// A public key a signature is checked with.
pub(super) struct PublicKey {
    algorithm: &'static dyn ring::signature::VerificationAlgorithm,
    /// The key itself (the SubjectPublicKeyInfo's bit string).
    raw: Vec<u8>,
    /// The SHA-256 of the DER SubjectPublicKeyInfo.
    pub(super) fingerprint: Sha256Digest,
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

    pub(super) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
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
}

#[cfg(feature = "https")]
impl Verifier {
    /// Whether a sigstore bundle's signature of `file` is one this
    /// verifier accepts; else what did not match.
    pub(super) fn check_file(&self, bundle: &[u8], file: &[u8]) -> Result<(), String> {
        let bundle = super::bundle::Bundle::read(bundle)?;
        let digest = Sha256Digest::of(file);
        if let Some(signed) = &bundle.digest
            && signed.as_slice() != digest.as_bytes()
        {
            return Err(format!("the bundle signs another file, not the one of {digest}"));
        }
        if bundle.signature.len() > MAX_SIGNATURE_BYTES {
            return Err(format!("its signature is longer than {MAX_SIGNATURE_BYTES} bytes"));
        }
        match self {
            Verifier::Key(key) => {
                if !key.verifies(file, &bundle.signature) {
                    return Err(format!("the bundle's signature does not verify with key {}", key.fingerprint));
                }
                Ok(())
            }
            Verifier::Keyless(keyless) => {
                let leaf =
                    bundle.certificate.as_ref().ok_or("the bundle has no certificate (it was made with a key)")?;
                let entry = bundle.entry.ok_or("the bundle has no transparency log entry")??;
                keyless.check_logged(file, &bundle.signature, leaf, &entry)
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A PEM public key of a SubjectPublicKeyInfo header (hex) and a raw key.
    #[cfg(feature = "oci")]
    pub(in crate::source) fn pem(header: &str, raw: &[u8]) -> String {
        use base64::Engine as _;
        let der: Vec<u8> =
            (0..header.len()).step_by(2).map(|i| u8::from_str_radix(&header[i..i + 2], 16).unwrap()).collect();
        let body = base64::engine::general_purpose::STANDARD.encode([der.as_slice(), raw].concat());
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"))
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
