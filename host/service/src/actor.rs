//! Who makes a request: the account, workspace and profile its token's
//! claims name.

use serde_json::Value;
use toolhost_mcp::auth::{Credential, Principal};

use crate::model::{Profile, ProfileMetadata, ProfileSpec, ProfileType};

/// The caller of a request, from its token's claims: `workspace_id`
/// (required), `account_id` (default: the workspace), `profile_id`
/// (default: `sub`), `profile_type` (`PROFILE_TYPE_USER`,
/// `PROFILE_TYPE_API_KEY`, `PROFILE_TYPE_SYSTEM`; default: `..._API_KEY`
/// for an API key, `..._USER` for a JWT), `email`, `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Actor {
    /// The account.
    pub account_id: String,
    /// The workspace every read and write is scoped to.
    pub workspace_id: String,
    /// The profile.
    pub profile_id: String,
    /// The kind of profile.
    pub kind: ProfileType,
    /// The person's email, if the token says.
    pub email: Option<String>,
    /// A display name, if the token says.
    pub name: Option<String>,
}

/// The longest id a claim may give.
const MAX_ID: usize = 128;

impl Actor {
    /// The actor a principal's claims name, or why they name none.
    pub fn of(principal: &Principal) -> Result<Actor, String> {
        let claims = &principal.claims;
        let id = |name: &str| -> Result<Option<String>, String> {
            match claims.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text))
                    if !text.is_empty()
                        && text.len() <= MAX_ID
                        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b)) =>
                {
                    Ok(Some(text.clone()))
                }
                Some(_) => {
                    Err(format!("the token's `{name}` claim is not an id (1 to {MAX_ID} letters, digits and -_.:@)"))
                }
            }
        };
        let workspace_id = id("workspace_id")?.ok_or("the token names no workspace (claim `workspace_id`)")?;
        let account_id = id("account_id")?.unwrap_or_else(|| workspace_id.clone());
        let profile_id = match id("profile_id")? {
            Some(profile) => profile,
            None if principal.subject.len() <= MAX_ID => principal.subject.clone(),
            None => return Err("the token's subject is too long to be a profile id".to_owned()),
        };
        let kind = match claims.get("profile_type") {
            None | Some(Value::Null) => match principal.credential {
                Credential::ApiKey => ProfileType::ApiKey,
                _ => ProfileType::User,
            },
            Some(value) => serde_json::from_value(value.clone()).map_err(|_| {
                "the token's `profile_type` is not PROFILE_TYPE_USER, PROFILE_TYPE_API_KEY or PROFILE_TYPE_SYSTEM"
                    .to_owned()
            })?,
        };
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(|s| s.chars().take(256).collect());
        Ok(Actor { account_id, workspace_id, profile_id, kind, email: text("email"), name: text("name") })
    }

    /// Its profile, as resources record their creator.
    pub fn profile(&self) -> Profile {
        Profile {
            metadata: ProfileMetadata {
                id: self.profile_id.clone(),
                account_id: self.account_id.clone(),
                name: self.name.clone().unwrap_or_else(|| self.profile_id.clone()),
                profile_id: self.profile_id.clone(),
                workspace_id: self.workspace_id.clone(),
            },
            spec: ProfileSpec { kind: self.kind, email: self.email.clone(), name: self.name.clone() },
        }
    }

    /// Whether it may change the tools of a managed tool set (API keys).
    pub fn may_manage(&self) -> bool {
        self.kind == ProfileType::ApiKey
    }
}
