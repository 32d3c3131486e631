//! The `Authorization` header of a request to `serve --http` with
//! authorization on: API keys, then JWTs against a JWKS. The first byte
//! chooses: the header as sent (anything), or a token signed with the
//! JWKS's key around claims the fuzzer writes, so that the claims are read
//! too.
#![no_main]

use std::sync::LazyLock;

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use toolhost_mcp::auth::{AuthSettings, Authenticator};

/// A P-256 key made for this target only (PKCS#8), and its public point.
const KEY: &str = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOsBBdy/sdjZjGSRgR0/n2QZihgpbG48RDwjBZgQi2Y6hRANCAASUmTh/SpkjBKd0JRVvinwAM53VEd/g4BtfbQ1+Us76r+hd/u1auTBhetmRF3Eqslc0U/lK4mrHapW/5KYhP9+L";
const X: &str = "lJk4f0qZIwSndCUVb4p8ADOd1RHf4OAbX20NflLO-q8";
const Y: &str = "6F3-7Vq5MGF62ZEXcSqyVzRT-Uriasdqlb_kpiE_34s";
const RESOURCE: &str = "https://tools.example/mcp";
const ISSUER: &str = "https://issuer.example";

struct Setup {
    runtime: tokio::runtime::Runtime,
    authenticator: Authenticator,
    key: jsonwebtoken::EncodingKey,
}

static SETUP: LazyLock<Setup> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("toolhost-fuzz-bearer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let jwks =
        json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig", "alg": "ES256", "x": X, "y": Y}]});
    std::fs::write(dir.join("jwks.json"), jwks.to_string()).expect("the JWKS written");
    let settings: AuthSettings = serde_json::from_value(json!({
        "requiredScopes": ["tools"],
        "jwt": {"issuer": ISSUER, "jwksFile": "jwks.json"},
        "apiKeys": [{"key": "fuzz-api-key-0123456789", "subject": "robot", "scopes": ["tools"]}],
    }))
    .expect("settings");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let authenticator =
        runtime.block_on(Authenticator::new(RESOURCE, settings, &dir)).expect("the authenticator is set up");
    let der = base64::engine::general_purpose::STANDARD.decode(KEY).expect("the key's DER");
    let key = jsonwebtoken::EncodingKey::from_ec_der(&der);
    Setup { runtime, authenticator, key }
});

fuzz_target!(|data: &[u8]| {
    let setup = &*SETUP;
    let Some((choice, rest)) = data.split_first() else {
        return;
    };
    let header = if choice % 2 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        // Claims the fuzzer writes, signed as the issuer signs.
        let Ok(claims) = serde_json::from_slice::<Value>(rest) else {
            return;
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("k1".to_owned());
        let Ok(token) = jsonwebtoken::encode(&header, &claims, &setup.key) else {
            return;
        };
        format!("Bearer {token}")
    };
    let _ = setup.runtime.block_on(setup.authenticator.authenticate(Some(&header)));
});
