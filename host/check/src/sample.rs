//! Values generated from a JSON Schema, for `toolhost check`: values meant to
//! satisfy it (leaning to its edges) and mutations meant to break it.
//!
//! Generation is best effort: the schema language is too rich to satisfy by
//! construction (`not`, `if`/`then`, `dependentRequired`, ...). Every value is
//! therefore judged afterwards by the same validator the host uses, and only
//! values it accepts (or, for mutations, refuses) are used.

use rand::{RngExt as _, rngs::StdRng, seq::IndexedRandom as _};
use serde_json::{Map, Value, json};

/// Which end of what a schema allows a value leans to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The least: required properties only, shortest strings, fewest items,
    /// smallest numbers.
    Minimal,
    /// The most: every property, longest strings, most items, largest
    /// numbers.
    Maximal,
    /// Anything allowed, edge values often.
    Random,
}

/// Nesting beyond which objects keep only required properties and arrays
/// only their minimum of items.
const SHALLOW_DEPTH: usize = 6;
/// Nesting at which generation gives up (a schema that requires itself).
const MAX_DEPTH: usize = 24;
/// How far past `minItems` arrays grow when `maxItems` does not say.
const EXTRA_ITEMS: usize = 5;
/// The longest string generated (`minLength`, `pattern`), in characters.
pub(crate) const MAX_STRING_CHARS: usize = 1 << 16;
/// The most items or properties generated for one array or object
/// (`minItems`, `minProperties`).
pub(crate) const MAX_ITEMS: usize = 1 << 12;
/// Values and characters one sample may hold in all.
const MAX_SAMPLE_UNITS: usize = 1 << 20;
/// Schema nodes (and 64-byte pieces of their strings) one tool's samples
/// may copy while folding `$ref`s and combinators together: `allOf` of
/// eight `$ref`s, each to another such, ten deep, folds 8^10 schemas, and
/// the plugin writes the schema. One budget for all of a tool's samples
/// (a check makes a hundred and more).
pub(crate) const MAX_SCHEMA_WORK: usize = 1 << 26;

/// Generates values for one schema document (whose local `$ref`s it
/// resolves).
pub(crate) struct Sampler<'a> {
    root: &'a Value,
    rng: &'a mut StdRng,
    /// Values and characters this sample may still hold.
    units_left: usize,
    /// Schema nodes the tool's samples may still copy.
    work_left: &'a mut usize,
    /// Why the schema asks for more than is generated, once it has.
    too_large: Option<String>,
}

/// Integers, numbers and strings.
mod scalars;

impl<'a> Sampler<'a> {
    /// A sampler of `root` drawing from `rng`, copying at most what is left
    /// of `work` (the tool's budget, [`MAX_SCHEMA_WORK`] to begin with).
    pub(crate) fn new(root: &'a Value, rng: &'a mut StdRng, work: &'a mut usize) -> Self {
        Sampler { root, rng, units_left: MAX_SAMPLE_UNITS, work_left: work, too_large: None }
    }

    /// A value meant to satisfy the whole document, or `None` where the
    /// schema cannot be followed (`false`, unresolvable `$ref`, endless
    /// recursion). `Err` says why the schema cannot be checked at all: the
    /// least it allows is larger than toolhost generates (a `minLength` of
    /// 10^15, say).
    pub(crate) fn sample(&mut self, shape: Shape) -> Result<Option<Value>, String> {
        let value = self.value(self.root, shape, 0);
        match self.too_large.take() {
            Some(reason) => Err(reason),
            None => Ok(value),
        }
    }

    /// Count `units` against the sample's size; false (with the reason
    /// kept) when they do not fit.
    fn charge(&mut self, units: usize) -> bool {
        if self.too_large.is_some() {
            return false;
        }
        match self.units_left.checked_sub(units) {
            Some(left) => {
                self.units_left = left;
                true
            }
            None => {
                self.too_large = Some(format!(
                    "the least the inputSchema allows is larger than toolhost check generates ({MAX_SAMPLE_UNITS} values and characters)"
                ));
                false
            }
        }
    }

    /// Count copying or merging `schema` against the sample's work; false
    /// (with the reason kept) past it. Counting stops where the work left
    /// does, so it costs no more than what it allows.
    fn work(&mut self, schema: &Map<String, Value>) -> bool {
        if self.too_large.is_some() {
            return false;
        }
        // A node costs one, and a string (a value or a key) one more per
        // 64 bytes: a long description is copied at every fold too.
        let cost = |text: &str| 1 + text.len() / 64;
        let object = |map: &Map<String, Value>| 1 + map.keys().map(|key| cost(key)).sum::<usize>();
        let mut left = self.work_left.checked_sub(object(schema));
        let mut pending: Vec<&Value> = schema.values().collect();
        while let Some(now) = left
            && let Some(value) = pending.pop()
        {
            let units = match value {
                Value::String(text) => cost(text),
                Value::Array(items) => {
                    pending.extend(items);
                    1
                }
                Value::Object(map) => {
                    pending.extend(map.values());
                    object(map)
                }
                _ => 1,
            };
            left = now.checked_sub(units);
        }
        if let Some(left) = left {
            *self.work_left = left;
            return true;
        }
        *self.work_left = 0;
        self.too_large = Some(format!(
            "the inputSchema's $refs and combinators take more work to follow than toolhost check does \
             ({MAX_SCHEMA_WORK} schema nodes copied per tool)"
        ));
        false
    }

    /// Refuse a bound past what is generated, keeping the reason.
    fn within(&mut self, keyword: &str, asked: usize, most: usize, unit: &str) -> bool {
        if asked <= most {
            return true;
        }
        self.too_large.get_or_insert_with(|| {
            format!("the inputSchema asks for `{keyword}` {asked}, more than toolhost check generates ({most} {unit})")
        });
        false
    }

    /// Changes to a valid object meant to break the document's schema, each
    /// with what was changed. Which of them really break it is for the
    /// validator to say.
    pub(crate) fn mutations(&mut self, valid: &Map<String, Value>) -> Vec<(String, Map<String, Value>)> {
        let Some(schema) = self.root.as_object().and_then(|root| self.flatten(root, Shape::Minimal, 0)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut with = |what: String, change: &dyn Fn(&mut Map<String, Value>)| {
            let mut changed = valid.clone();
            change(&mut changed);
            out.push((what, changed));
        };
        for name in required(&schema) {
            with(format!("without the required property `{name}`"), &|m| {
                m.remove(&name);
            });
        }
        if schema.get("additionalProperties") == Some(&Value::Bool(false))
            || schema.get("unevaluatedProperties") == Some(&Value::Bool(false))
        {
            with("with an undeclared property".to_owned(), &|m| {
                m.insert("toolhost_check_unexpected".to_owned(), json!(true));
            });
        }
        let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        for (name, property) in &properties {
            let Some(property) = property.as_object().and_then(|p| self.flatten(p, Shape::Minimal, 0)) else {
                continue;
            };
            for (what, bad) in bad_values(&property) {
                with(format!("with `{name}` {what}"), &|m| {
                    m.insert(name.clone(), bad.clone());
                });
            }
        }
        out
    }

    fn value(&mut self, schema: &Value, shape: Shape, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH || !self.charge(1) {
            return None;
        }
        let schema = match schema {
            Value::Bool(false) => return None,
            Value::Object(map) => self.flatten(map, shape, depth)?,
            _ => return Some(self.anything(shape)),
        };
        if let Some(value) = schema.get("const") {
            return Some(value.clone());
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            return self.pick(options, shape).cloned();
        }
        match self.pick_type(&schema, shape) {
            "null" => Some(Value::Null),
            "boolean" => Some(Value::Bool(match shape {
                Shape::Minimal => false,
                Shape::Maximal => true,
                Shape::Random => self.rng.random_bool(0.5),
            })),
            "integer" => self.integer(&schema, shape).map(Value::from),
            "number" => self.number(&schema, shape),
            "string" => self.string(&schema, shape).map(Value::String),
            "array" => self.array(&schema, shape, depth),
            "object" => self.object(&schema, shape, depth),
            _ => Some(self.anything(shape)),
        }
    }

    /// One schema object with `$ref`, `allOf`, `anyOf` and `oneOf` folded
    /// in (a branch chosen for the last two).
    fn flatten(&mut self, schema: &Map<String, Value>, shape: Shape, depth: usize) -> Option<Map<String, Value>> {
        if depth > MAX_DEPTH || !self.work(schema) {
            return None;
        }
        let mut out = schema.clone();
        if let Some(Value::String(reference)) = out.remove("$ref") {
            match self.resolve(&reference)? {
                Value::Bool(false) => return None,
                Value::Object(target) => {
                    let target = self.flatten(target, shape, depth + 1)?;
                    if !self.work(&target) {
                        return None;
                    }
                    merge(&mut out, target);
                }
                _ => {}
            }
        }
        if let Some(Value::Array(parts)) = out.remove("allOf") {
            for part in &parts {
                match part {
                    Value::Bool(false) => return None,
                    Value::Object(part) => {
                        let part = self.flatten(part, shape, depth + 1)?;
                        if !self.work(&part) {
                            return None;
                        }
                        merge(&mut out, part);
                    }
                    _ => {}
                }
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = out.remove(key) {
                let usable: Vec<Value> = branches.into_iter().filter(|b| b != &Value::Bool(false)).collect();
                match self.pick(&usable, shape) {
                    None => return None,
                    Some(Value::Object(branch)) => {
                        let branch = branch.clone();
                        let branch = self.flatten(&branch, shape, depth + 1)?;
                        if !self.work(&branch) {
                            return None;
                        }
                        merge(&mut out, branch);
                    }
                    Some(_) => {}
                }
            }
        }
        Some(out)
    }

    /// The target of a local reference (`#` or `#/json/pointer`).
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        let decoded = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
        self.root.pointer(&decoded)
    }

    fn pick<'v>(&mut self, options: &'v [Value], shape: Shape) -> Option<&'v Value> {
        match shape {
            Shape::Minimal => options.first(),
            Shape::Maximal => options.last(),
            Shape::Random => options.choose(self.rng),
        }
    }

    fn pick_type(&mut self, schema: &Map<String, Value>, shape: Shape) -> &'static str {
        const TYPES: [&str; 7] = ["null", "boolean", "integer", "number", "string", "array", "object"];
        let named = |name: &str| TYPES.iter().copied().find(|t| *t == name);
        match schema.get("type") {
            Some(Value::String(t)) => return named(t).unwrap_or("any"),
            Some(Value::Array(types)) => {
                let types: Vec<&'static str> = types.iter().filter_map(Value::as_str).filter_map(named).collect();
                // Lean away from `null` except when it is all there is.
                let non_null: Vec<&'static str> = types.iter().copied().filter(|t| *t != "null").collect();
                let choice = match shape {
                    Shape::Minimal => types.first().copied(),
                    Shape::Maximal => non_null.last().or(types.last()).copied(),
                    Shape::Random => types.choose(self.rng).copied(),
                };
                if let Some(t) = choice {
                    return t;
                }
            }
            _ => {}
        }
        let has = |keys: &[&str]| keys.iter().any(|k| schema.contains_key(*k));
        if has(&[
            "properties",
            "required",
            "additionalProperties",
            "minProperties",
            "maxProperties",
            "patternProperties",
        ]) {
            "object"
        } else if has(&["items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"]) {
            "array"
        } else if has(&["minLength", "maxLength", "pattern", "format"]) {
            "string"
        } else if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
            "number"
        } else {
            match shape {
                Shape::Minimal => "null",
                Shape::Maximal => "object",
                Shape::Random => ["null", "boolean", "integer", "number", "string"].choose(self.rng).unwrap_or(&"null"),
            }
        }
    }

    /// A value for a schema that allows anything.
    fn anything(&mut self, shape: Shape) -> Value {
        match shape {
            Shape::Minimal => Value::Null,
            Shape::Maximal => json!({"nested": ["any", 1, 2.5, true, null]}),
            Shape::Random => [json!(null), json!(true), json!(0), json!(-2.5), json!("any"), json!([]), json!({})]
                .choose(self.rng)
                .cloned()
                .unwrap_or(Value::Null),
        }
    }

    fn array(&mut self, schema: &Map<String, Value>, shape: Shape, depth: usize) -> Option<Value> {
        // 2020-12 `prefixItems` + `items`, or draft-07 tuple `items` +
        // `additionalItems`.
        let (prefix, rest): (Vec<Value>, Value) = match (schema.get("prefixItems"), schema.get("items")) {
            (Some(Value::Array(prefix)), items) => (prefix.clone(), items.cloned().unwrap_or(Value::Bool(true))),
            (None, Some(Value::Array(tuple))) => {
                (tuple.clone(), schema.get("additionalItems").cloned().unwrap_or(Value::Bool(true)))
            }
            (_, items) => (Vec::new(), items.cloned().unwrap_or(Value::Bool(true))),
        };
        let min = count(schema, "minItems").unwrap_or(0);
        if !self.within("minItems", min, MAX_ITEMS, "items") {
            return None;
        }
        let mut max = count(schema, "maxItems").unwrap_or(usize::MAX).max(min);
        if rest == Value::Bool(false) {
            max = max.min(prefix.len()).max(min);
        }
        let len = match shape {
            _ if depth >= SHALLOW_DEPTH => min,
            Shape::Minimal => min,
            Shape::Maximal => max.min(min + EXTRA_ITEMS),
            Shape::Random => self.rng.random_range(min..=max.min(min + EXTRA_ITEMS)),
        };
        let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
        let mut items: Vec<Value> = Vec::with_capacity(len);
        for i in 0..len {
            let item_schema = prefix.get(i).unwrap_or(&rest);
            // Unique items need distinct values: retry with random ones.
            let mut item = self.value(item_schema, shape, depth + 1)?;
            let mut tries = 0;
            while unique && items.contains(&item) && tries < 16 {
                item = self.value(item_schema, Shape::Random, depth + 1)?;
                tries += 1;
            }
            if unique && items.contains(&item) {
                if i >= min {
                    break;
                }
                return None;
            }
            items.push(item);
        }
        Some(Value::Array(items))
    }

    fn object(&mut self, schema: &Map<String, Value>, shape: Shape, depth: usize) -> Option<Value> {
        let properties = schema.get("properties").and_then(Value::as_object);
        let required = required(schema);
        let extra_schema = match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(other) => Some(other.clone()),
            None => Some(Value::Bool(true)),
        };
        let mut out = Map::new();
        for name in &required {
            let property = properties.and_then(|p| p.get(name)).cloned().or_else(|| extra_schema.clone())?;
            out.insert(name.clone(), self.value(&property, shape, depth + 1)?);
        }
        if let Some(properties) = properties {
            for (name, property) in properties {
                if out.contains_key(name) {
                    continue;
                }
                let include = match shape {
                    _ if depth >= SHALLOW_DEPTH => false,
                    Shape::Minimal => out.len() < count(schema, "minProperties").unwrap_or(0),
                    Shape::Maximal => true,
                    Shape::Random => self.rng.random_bool(0.5),
                };
                if include && let Some(value) = self.value(property, shape, depth + 1) {
                    out.insert(name.clone(), value);
                }
            }
        }
        let min_properties = count(schema, "minProperties").unwrap_or(0);
        if !self.within("minProperties", min_properties, MAX_ITEMS, "properties") {
            return None;
        }
        let mut n = 0;
        while out.len() < min_properties {
            let extra = extra_schema.clone()?;
            out.insert(format!("extra_{n}"), self.value(&extra, shape, depth + 1)?);
            n += 1;
        }
        Some(Value::Object(out))
    }
}

/// Add `extra`'s constraints to `base`: properties of both are required to
/// hold both schemas (`allOf`), `required` is the union, and other keywords
/// `base` lacks are taken from `extra`.
fn merge(base: &mut Map<String, Value>, extra: Map<String, Value>) {
    for (key, value) in extra {
        match (key.as_str(), base.get_mut(&key), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, schema) in theirs {
                    match mine.get_mut(&name) {
                        Some(existing) => *existing = json!({"allOf": [existing.take(), schema]}),
                        None => {
                            mine.insert(name, schema);
                        }
                    }
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn required(schema: &Map<String, Value>) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn number(schema: &Map<String, Value>, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn count(schema: &Map<String, Value>, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Values of a property's schema meant to break it, each with what is wrong
/// with it.
fn bad_values(schema: &Map<String, Value>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let allows = |t: &str| types.contains(&t) || (t == "integer" && types.contains(&"number"));
        let candidates = [
            ("string", json!("not the right type")),
            ("integer", json!(12345)),
            ("boolean", json!(true)),
            ("object", json!({"unexpected": "object"})),
            ("array", json!(["unexpected", "array"])),
            ("null", Value::Null),
        ];
        if let Some((t, value)) = candidates.into_iter().find(|(t, _)| !allows(t)) {
            out.push((format!("of the wrong type ({t})"), value));
        }
        if types == ["integer"] {
            out.push(("not a whole number".to_owned(), json!(0.5)));
        }
    }
    if schema.contains_key("enum") || schema.contains_key("const") {
        out.push(("outside its allowed values".to_owned(), json!("toolhost-check: not an allowed value")));
    }
    if let Some(min) = number(schema, "minimum").or_else(|| number(schema, "exclusiveMinimum")) {
        out.push(("below its minimum".to_owned(), json!((min - 1.0).floor())));
    }
    if let Some(max) = number(schema, "maximum").or_else(|| number(schema, "exclusiveMaximum")) {
        out.push(("above its maximum".to_owned(), json!((max + 1.0).ceil())));
    }
    if count(schema, "minLength").is_some_and(|n| n > 0) {
        out.push(("shorter than its minLength".to_owned(), json!("")));
    }
    if let Some(max) = count(schema, "maxLength").filter(|n| *n < 1 << 16) {
        out.push(("longer than its maxLength".to_owned(), json!("x".repeat(max + 1))));
    }
    if count(schema, "minItems").is_some_and(|n| n > 0) {
        out.push(("with fewer items than its minItems".to_owned(), json!([])));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    fn samples(schema: Value, shape: Shape) -> Vec<Value> {
        let mut rng = StdRng::seed_from_u64(7);
        (0..20)
            .filter_map(|_| {
                Sampler::new(&schema, &mut rng, &mut MAX_SCHEMA_WORK.clone()).sample(shape).expect("checkable")
            })
            .collect()
    }

    #[test]
    fn a_range_wider_than_a_double_is_sampled_not_a_panic() {
        let schema = json!({"type": "number", "minimum": -1e308, "maximum": 1e308});
        let random = samples(schema, Shape::Random);
        assert_eq!(random.len(), 20);
        assert!(random.iter().all(|n| n.as_f64().is_some_and(|n| n.is_finite() && n.abs() <= 1e308)), "{random:?}");
    }

    #[test]
    fn a_schema_that_folds_into_itself_without_end_is_refused_not_followed() {
        // Each level folds eight of the next: 8^10 schemas to copy.
        let mut defs = serde_json::Map::new();
        for level in 0..10 {
            let next = json!({"$ref": format!("#/$defs/l{}", level + 1)});
            defs.insert(format!("l{level}"), json!({"allOf": vec![next; 8]}));
        }
        defs.insert("l10".to_owned(), json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        let schema = json!({"$defs": defs, "$ref": "#/$defs/l0"});
        let mut rng = StdRng::seed_from_u64(7);
        // (A smaller budget than a tool's, for a test of a debug build.)
        let refused = Sampler::new(&schema, &mut rng, &mut (1 << 20)).sample(Shape::Random).expect_err("refused");
        assert!(refused.contains("take more work to follow than toolhost check does"), "{refused}");
    }

    #[test]
    fn edges_follow_the_bounds() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 3, "maximum": 9},
            "s": {"type": "string", "minLength": 2, "maxLength": 4},
            "o": {"type": "boolean"}
        }, "required": ["n", "s"]});
        let minimal = samples(schema.clone(), Shape::Minimal);
        assert_eq!(minimal[0], json!({"n": 3, "s": "aa"}));
        let maximal = samples(schema, Shape::Maximal);
        assert_eq!(maximal[0]["n"], json!(9));
        assert_eq!(maximal[0]["s"].as_str().map(|s| s.chars().count()), Some(4));
        assert_eq!(maximal[0]["o"], json!(true));
    }

    #[test]
    fn refs_combinators_and_patterns_are_followed() {
        let schema = json!({
            "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}},
            "type": "object",
            "properties": {
                "code": {"$ref": "#/$defs/code"},
                "either": {"oneOf": [{"type": "integer", "multipleOf": 5, "minimum": 1}, {"const": "x"}]}
            },
            "required": ["code", "either"]
        });
        let pattern = regex::Regex::new("^[A-Z]{3}-[0-9]{2}$").unwrap();
        for value in samples(schema, Shape::Random) {
            assert!(pattern.is_match(value["code"].as_str().unwrap()), "{value}");
            let either = &value["either"];
            assert!(either == "x" || either.as_i64().is_some_and(|n| n >= 5 && n % 5 == 0), "{value}");
        }
    }

    #[test]
    fn a_schema_that_requires_itself_gives_up() {
        let schema = json!({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]});
        assert!(samples(schema, Shape::Minimal).is_empty());
        let optional = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
        assert_eq!(samples(optional, Shape::Minimal)[0], json!({}));
    }

    #[test]
    fn huge_minimums_are_refused_not_allocated() {
        let mut rng = StdRng::seed_from_u64(1);
        for (schema, keyword) in [
            (json!({"type": "string", "minLength": 1_000_000_000_000_000u64}), "minLength"),
            (json!({"type": "array", "minItems": 1_000_000_000_000_000u64}), "minItems"),
            (json!({"type": "object", "minProperties": 1_000_000_000_000_000u64}), "minProperties"),
            (json!({"type": "string", "pattern": "^(a{1000}){1000}{1000}$"}), "pattern"),
            (json!({"type": "string", "pattern": "(a{65535}){65535}"}), "pattern"),
        ] {
            for shape in [Shape::Minimal, Shape::Maximal, Shape::Random] {
                let reason =
                    Sampler::new(&schema, &mut rng, &mut MAX_SCHEMA_WORK.clone()).sample(shape).expect_err(keyword);
                assert!(reason.contains(&format!("`{keyword}`")), "{reason}");
            }
        }
        // Each within bounds, but together too many: 4096 items of 4096 items.
        let nested = json!({"type": "array", "minItems": 4096, "items": {"type": "array", "minItems": 4096}});
        let reason = Sampler::new(&nested, &mut rng, &mut MAX_SCHEMA_WORK.clone())
            .sample(Shape::Minimal)
            .expect_err("too large in all");
        assert!(reason.contains("larger than toolhost check generates"), "{reason}");
    }

    #[test]
    fn mutations_name_what_they_break() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"], "additionalProperties": false});
        let mut rng = StdRng::seed_from_u64(1);
        let valid = json!({"a": 1}).as_object().cloned().unwrap();
        let mutations = Sampler::new(&schema, &mut rng, &mut MAX_SCHEMA_WORK.clone()).mutations(&valid);
        let names: Vec<&str> = mutations.iter().map(|(what, _)| what.as_str()).collect();
        assert_eq!(
            names,
            ["without the required property `a`", "with an undeclared property", "with `a` of the wrong type (string)"]
        );
        assert_eq!(mutations[2].1, *json!({"a": "not the right type"}).as_object().unwrap());
    }
}
