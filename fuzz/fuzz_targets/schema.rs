//! A plugin's schema and an instance: the cost bounds, compilation and
//! check never panic, and a check the bound admits ends within the
//! fuzzer's timeout (`toolhost::fuzzing::schema`). The input is a JSON
//! array `[schema, instance]`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Array(pair)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let [schema, instance] = pair.as_slice() {
        toolhost::fuzzing::schema(schema, instance);
    }
});
