use toolhost_plugin_sdk::prelude::*;

#[derive(Deserialize)]
struct Id {
    id: String,
}

/// One memo.
#[resource(uri = "memo://one")]
fn memo(Id { id }: Id) -> String {
    id
}

fn main() {}
