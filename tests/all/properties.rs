//! Property tests: arguments generated to satisfy a schema pass the host's
//! check, and each kind of mutation fails it at the mutated value's pointer.

use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolhost::{Error, Plugin, ValidationOptions};
use toolhost_tests::{example, fixture};

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 10},
            "count": {"type": "integer", "minimum": 0, "maximum": 100},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "mode": {"enum": ["fast", "safe"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
                "additionalProperties": false
            }
        },
        "required": ["name", "count", "mode", "point"],
        "additionalProperties": false
    })
}

fn load(path: std::path::PathBuf, config: Option<(&str, String)>) -> Plugin {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut builder = Plugin::builder_from_file(path).with_validation(ValidationOptions::default());
    if let Some((key, value)) = config {
        builder = builder.with_config(key, value);
    }
    runtime.block_on(builder.build()).expect("load")
}

static SCRIPTED: LazyLock<Plugin> = LazyLock::new(|| {
    let describe = json!({"tools": [{"name": "t", "description": "d", "inputSchema": schema()}]});
    load(fixture("scripted"), Some(("describe", describe.to_string())))
});

static CALCULATOR: LazyLock<Plugin> = LazyLock::new(|| load(example("calculator"), None));

/// Objects that satisfy `schema()`.
fn valid_arguments() -> impl Strategy<Value = Map<String, Value>> {
    (
        "[a-zA-Z0-9 ]{1,10}",
        0i64..=100,
        proptest::option::of(0.0001f64..=1.0),
        prop_oneof![Just("fast"), Just("safe")],
        proptest::option::of(proptest::collection::vec("[a-z]{0,5}", 0..=3)),
        any::<(i32, i32)>(),
    )
        .prop_map(|(name, count, ratio, mode, tags, (x, y))| {
            let mut args = Map::new();
            args.insert("name".into(), json!(name));
            args.insert("count".into(), json!(count));
            if let Some(ratio) = ratio {
                args.insert("ratio".into(), json!(ratio));
            }
            args.insert("mode".into(), json!(mode));
            if let Some(tags) = tags {
                args.insert("tags".into(), json!(tags));
            }
            args.insert("point".into(), json!({"x": x, "y": y}));
            args
        })
}

/// One way to break valid arguments, and the pointer that must be named.
#[derive(Debug, Clone)]
enum Mutation {
    Drop(&'static str),
    WrongType(&'static str),
    OutOfRange(&'static str),
    Extra(String),
    DropNested(&'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        prop_oneof![Just("name"), Just("count"), Just("mode"), Just("point")].prop_map(Mutation::Drop),
        prop_oneof![Just("name"), Just("count"), Just("ratio"), Just("tags"), Just("point")]
            .prop_map(Mutation::WrongType),
        prop_oneof![Just("name"), Just("count"), Just("ratio"), Just("mode"), Just("tags")]
            .prop_map(Mutation::OutOfRange),
        "[a-z]{1,8}_extra".prop_map(Mutation::Extra),
        prop_oneof![Just("x"), Just("y")].prop_map(Mutation::DropNested),
    ]
}

/// Apply a mutation; returns the JSON pointer the error must name.
fn apply(args: &mut Map<String, Value>, mutation: &Mutation) -> String {
    match mutation {
        Mutation::Drop(field) => {
            args.remove(*field);
            format!("/{field}")
        }
        Mutation::WrongType(field) => {
            let wrong = match *field {
                "name" => json!(42),
                "count" => json!("many"),
                "ratio" => json!([0.5]),
                "tags" => json!("a,b"),
                _ => json!(true),
            };
            args.insert((*field).to_owned(), wrong);
            format!("/{field}")
        }
        Mutation::OutOfRange(field) => {
            let bad = match *field {
                "name" => json!("x".repeat(11)),
                "count" => json!(101),
                "ratio" => json!(0),
                "mode" => json!("slow"),
                _ => json!(["a", "b", "c", "d"]),
            };
            args.insert((*field).to_owned(), bad);
            format!("/{field}")
        }
        Mutation::Extra(name) => {
            args.insert(name.clone(), json!(1));
            // additionalProperties reports at the object holding the extra key.
            String::new()
        }
        Mutation::DropNested(field) => {
            if let Some(Value::Object(point)) = args.get_mut("point") {
                point.remove(*field);
            }
            format!("/point/{field}")
        }
    }
}

fn pointers(error: &Error) -> Vec<String> {
    match error {
        Error::InvalidArguments { violations, .. } => violations.iter().map(|v| v.instance_path.clone()).collect(),
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_valid_arguments_pass(args in valid_arguments()) {
        prop_assert!(SCRIPTED.validate_arguments("t", Value::Object(args.clone())).is_ok(), "{:?}", args);
    }

    #[test]
    fn mutated_arguments_fail_at_the_mutated_pointer(mut args in valid_arguments(), mutation in mutation()) {
        let pointer = apply(&mut args, &mutation);
        let error = SCRIPTED.validate_arguments("t", Value::Object(args.clone())).expect_err("mutated arguments must fail");
        let found = pointers(&error);
        prop_assert!(found.contains(&pointer), "{:?}: expected {} in {:?}", mutation, pointer, found);
    }

    #[test]
    fn calculator_accepts_any_pair_of_numbers(a in any::<f64>().prop_filter("finite", |f| f.is_finite()), b in -1e9f64..1e9) {
        let args = json!({"a": a, "b": b});
        let checked = CALCULATOR.validate_arguments("add", args);
        prop_assert!(checked.is_ok(), "{:?}", checked);
    }

    #[test]
    fn calculator_refuses_a_non_number(a in "[a-z]{0,6}", b in any::<i64>()) {
        let args = json!({"a": a, "b": b});
        let error = CALCULATOR.validate_arguments("add", args).expect_err("a string is not a number");
        prop_assert_eq!(pointers(&error), vec!["/a".to_owned()]);
    }
}
