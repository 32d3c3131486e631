//! Cosign signatures of OCI artifacts: where `cosign sign` puts them.
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
//! A plugin is verified when one payload's signature verifies (with the
//! key, or keyless with the certificate and log entry beside it) and that
//! payload names the pinned digest. The signature is over the payload's
//! bytes as stored: ECDSA P-256 with SHA-256 (DER-encoded), or Ed25519
//! over the bytes themselves.

use base64::Engine as _;
use serde::Deserialize;

use super::Sha256Digest;
use super::keyless;
use super::signature::{MAX_SIGNATURE_BYTES, Verifier};

/// The media type of a cosign signature layer.
pub(super) const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the signature.
pub(super) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What a payload's `critical.type` says.
const COSIGN_TYPE: &str = "cosign container image signature";

/// Whether a signature layer (its annotations, its payload) is a
/// signature of `digest` this verifier accepts; else what did not match.
pub(super) fn check_layer(
    verifier: &Verifier,
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
    match verifier {
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

/// A signature as a registry or a server hands it, checked by the
/// verifiers toolhost builds (for the `signature` fuzz target): `bytes`
/// split at its first NUL into a cosign layer's annotations (JSON) and
/// payload, checked with a key and keyless; and the whole, as a sigstore
/// bundle of a file. Nobody holds the private halves of the key, the CA or
/// the log, so nothing verifies.
#[cfg(all(feature = "fuzzing", feature = "oci", feature = "https"))]
pub(crate) fn fuzz(bytes: &[u8]) {
    use std::sync::OnceLock;
    /// A P-256 key whose private half was thrown away.
    const KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEToly52tNx7Z+q4Hk4vXHWac/8rJC
DpstzzKXa/dz9puuLe+uv+gnj2tD+mSvGWbjaDP5+q60vcwp1MvurSf1yw==
-----END PUBLIC KEY-----
";
    /// The staging sigstore's trusted root (see tests/fixtures/sigstore).
    const ROOT: &[u8] = include_bytes!("../../../../tests/fixtures/sigstore/trusted_root.json");
    static VERIFIERS: OnceLock<[Verifier; 2]> = OnceLock::new();
    let verifiers = VERIFIERS.get_or_init(|| {
        [
            Verifier::Key(super::signature::PublicKey::from_pem(KEY).expect("the fuzz key")),
            Verifier::Keyless(
                keyless::Keyless::of_root("william@yossarian.net", "https://github.com/login/oauth", ROOT)
                    .expect("the fuzz trusted root"),
            ),
        ]
    });
    let digest = Sha256Digest::of(b"a manifest nobody signed");
    let (annotations, payload) = match bytes.iter().position(|&b| b == 0) {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[][..]),
    };
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(annotations).unwrap_or_default();
    for verifier in verifiers {
        let layer = check_layer(verifier, &annotations, payload, &digest);
        assert!(layer.is_err(), "a cosign layer verified without the private key");
        let file = verifier.check_file(bytes, b"a file nobody signed");
        assert!(file.is_err(), "a sigstore bundle verified without the private key");
    }
}

#[cfg(test)]
mod tests {
    use ring::rand::SystemRandom;
    use ring::signature::KeyPair as _;

    use super::*;
    use crate::source::signature::PublicKey;
    use crate::source::signature::tests::pem;

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
        check_layer(verifier, &annotations, payload, digest)
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

    /// The fuzz target's seeds (a bundle sigstore made, cosign layers
    /// built from it) verify nothing.
    #[cfg(all(feature = "fuzzing", feature = "oci", feature = "https"))]
    #[test]
    fn the_signature_fuzz_seeds_verify_nothing() {
        let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/signature");
        let mut read = 0;
        for seed in std::fs::read_dir(seeds).expect("the seeds") {
            fuzz(&std::fs::read(seed.expect("a seed").path()).expect("a seed's bytes"));
            read += 1;
        }
        assert!(read >= 4, "{read} seeds");
    }
}
