//! Bounds on what a plugin's schema can cost, checked at load.
//!
//! A tool's `inputSchema` and `outputSchema` are chosen by the plugin, so
//! they are hostile input: `anyOf` branches that `$ref` the same definition,
//! nested twenty deep, make a 1 KB schema cost millions of subschema
//! evaluations against a tiny instance. Before a schema is compiled,
//! [`check_document`] bounds its size, nesting and regular expressions;
//! after it compiled, [`evaluations`] follows every applicator and `$ref`
//! (with memoisation) to bound how many subschemas one place of an instance
//! can be evaluated against, at every depth of the instance, so recursion
//! that multiplies per level is caught as well as `$ref` fan-out. Schemas
//! past a bound are refused with the JSON pointer of the offending part.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// JSON values (of any kind) a schema document may hold.
pub(crate) const MAX_VALUES: usize = 20_000;
/// How deep a schema document may nest (objects and arrays).
pub(crate) const MAX_DEPTH: usize = 64;
/// Subschemas an `allOf`, `anyOf`, `oneOf`, `prefixItems` (or tuple
/// `items`) may list.
pub(crate) const MAX_WIDTH: usize = 256;
/// `pattern`s and `patternProperties` a schema may hold: each is a compiled
/// regular expression.
pub(crate) const MAX_PATTERNS: usize = 100;
/// Subschema evaluations one place of an instance may cost, at most.
pub(crate) const MAX_EVALUATIONS: u64 = 10_000;
/// Instance depth the analysis follows recursion to: serde_json does not
/// parse deeper documents.
const MAX_INSTANCE_DEPTH: usize = 128;
/// Work the analysis itself may do before it gives up on a schema.
const MAX_ANALYSIS_WORK: u64 = 5_000_000;
/// Counts saturate here: anything above the bound is refused anyway.
const CAP: u64 = MAX_EVALUATIONS + 1;

/// A schema refused for its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooCostly {
    /// JSON pointer of the offending part, within the schema.
    pub pointer: String,
    /// Why, with the bound.
    pub message: String,
}

impl TooCostly {
    fn at(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        TooCostly { pointer: pointer.into(), message: message.into() }
    }
}

/// Check the document's size, nesting and number of regular expressions.
/// Cheap, and done before anything else looks at the schema.
pub(crate) fn check_document(schema: &Value) -> Result<(), TooCostly> {
    let mut values = 0usize;
    let mut patterns = 0usize;
    // (value, its path segments' count, a way to name it when refused)
    let mut stack: Vec<(&Value, Vec<String>)> = vec![(schema, Vec::new())];
    while let Some((value, path)) = stack.pop() {
        // (Scalars are counted with their parent, containers here.)
        values += 1;
        if value.is_object() || value.is_array() {
            values += value.as_object().map_or(0, |m| m.values().filter(|v| !is_container(v)).count());
            values += value.as_array().map_or(0, |a| a.iter().filter(|v| !is_container(v)).count());
        }
        if values > MAX_VALUES {
            return Err(TooCostly::at(
                "",
                format!("the schema holds more than {MAX_VALUES} JSON values; toolhost refuses larger schemas"),
            ));
        }
        if path.len() > MAX_DEPTH {
            return Err(TooCostly::at(
                pointer_of(&path),
                format!("the schema nests deeper than {MAX_DEPTH} levels; toolhost refuses deeper schemas"),
            ));
        }
        match value {
            Value::Object(map) => {
                if map.get("pattern").is_some_and(Value::is_string) {
                    patterns += 1;
                }
                if let Some(Value::Object(by_pattern)) = map.get("patternProperties") {
                    patterns += by_pattern.len();
                }
                if patterns > MAX_PATTERNS {
                    return Err(TooCostly::at(
                        pointer_of(&path),
                        format!(
                            "the schema holds more than {MAX_PATTERNS} regular expressions (`pattern`, `patternProperties`)"
                        ),
                    ));
                }
                for (key, child) in map {
                    if is_container(child) {
                        stack.push((child, extended(&path, key)));
                    }
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    if is_container(child) {
                        stack.push((child, extended(&path, &index.to_string())));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn is_container(value: &Value) -> bool {
    value.is_object() || value.is_array()
}

fn extended(path: &[String], segment: &str) -> Vec<String> {
    let mut path = path.to_vec();
    path.push(segment.to_owned());
    path
}

fn pointer_of(path: &[String]) -> String {
    path.iter().map(|segment| format!("/{}", escape(segment))).collect()
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Where a descending applicator takes the evaluation: a child of the
/// instance with this name or index, any child, or a property name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Step {
    Name(usize),
    AnyName,
    Index(usize),
    AnyIndex,
    Key,
}

/// The label of a place reached by one step: a concrete name or index, or
/// one no applicator names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Name(usize),
    OtherName,
    Index(usize),
    OtherIndex,
    Key,
}

/// One subschema: the subschemas evaluated at the same place of the
/// instance (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`,
/// `dependentSchemas`, `$ref`) and those evaluated at a child of it.
struct Node {
    pointer: String,
    in_place: Vec<usize>,
    descend: Vec<(Step, usize)>,
}

/// A count per (step, subschema), saturating.
type Descents = HashMap<(Step, usize), u64>;

struct Graph<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    ids: HashMap<String, usize>,
    names: HashMap<String, usize>,
    /// `$id` (without a trailing `#`) and `$anchor` targets, for `$ref`.
    resources: HashMap<String, String>,
    anchors: HashMap<String, String>,
}

/// The most subschema evaluations one place of an instance can cost
/// against `schema` (at least 1), or why the schema is refused: a
/// combinator wider than [`MAX_WIDTH`], a `$ref` cycle that never descends
/// into the instance, a `$ref` toolhost cannot follow, or more than
/// [`MAX_EVALUATIONS`] evaluations at one place.
pub(crate) fn evaluations(schema: &Value) -> Result<u64, TooCostly> {
    let mut graph = Graph {
        root: schema,
        nodes: Vec::new(),
        ids: HashMap::new(),
        names: HashMap::new(),
        resources: HashMap::new(),
        anchors: HashMap::new(),
    };
    graph.collect_targets(schema, String::new());
    graph.build()?;
    let (local, descents) = graph.in_place_costs()?;
    graph.per_place_bound(&local, &descents)
}

impl<'a> Graph<'a> {
    /// Remember where each `$id` and `$anchor` is.
    fn collect_targets(&mut self, value: &Value, pointer: String) {
        let mut stack = vec![(value, pointer)];
        while let Some((value, pointer)) = stack.pop() {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(id)) = map.get("$id") {
                        match id.strip_prefix('#') {
                            // draft-07 spells an anchor `"$id": "#name"`.
                            Some(anchor) => self.anchors.entry(anchor.to_owned()).or_insert_with(|| pointer.clone()),
                            None => self
                                .resources
                                .entry(id.trim_end_matches('#').to_owned())
                                .or_insert_with(|| pointer.clone()),
                        };
                    }
                    if let Some(Value::String(anchor)) = map.get("$anchor") {
                        self.anchors.entry(anchor.clone()).or_insert_with(|| pointer.clone());
                    }
                    for (key, child) in map {
                        if child.is_object() || child.is_array() {
                            stack.push((child, format!("{pointer}/{}", escape(key))));
                        }
                    }
                }
                Value::Array(items) => {
                    for (index, child) in items.iter().enumerate() {
                        if child.is_object() || child.is_array() {
                            stack.push((child, format!("{pointer}/{index}")));
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The node of the subschema at `pointer`, made if new.
    fn node(&mut self, pointer: String, queue: &mut Vec<usize>) -> usize {
        if let Some(&id) = self.ids.get(&pointer) {
            return id;
        }
        let id = self.nodes.len();
        self.ids.insert(pointer.clone(), id);
        self.nodes.push(Node { pointer, in_place: Vec::new(), descend: Vec::new() });
        queue.push(id);
        id
    }

    fn name(&mut self, name: &str) -> usize {
        let next = self.names.len();
        *self.names.entry(name.to_owned()).or_insert(next)
    }

    /// Every subschema reachable from the root, with its edges.
    fn build(&mut self) -> Result<(), TooCostly> {
        let mut queue = Vec::new();
        self.node(String::new(), &mut queue);
        while let Some(id) = queue.pop() {
            let pointer = self.nodes[id].pointer.clone();
            let root = self.root;
            let Some(Value::Object(map)) = root.pointer(&pointer) else { continue };
            let mut in_place = Vec::new();
            let mut descend = Vec::new();
            let child = |key: &str| format!("{pointer}/{}", escape(key));
            for (keyword, value) in map {
                let at = child(keyword);
                match (keyword.as_str(), value) {
                    ("allOf" | "anyOf" | "oneOf", Value::Array(branches)) => {
                        check_width(&at, keyword, branches.len())?;
                        for index in 0..branches.len() {
                            in_place.push(format!("{at}/{index}"));
                        }
                    }
                    ("not" | "if" | "then" | "else", _) => in_place.push(at),
                    ("dependentSchemas" | "dependencies", Value::Object(by_name)) => {
                        for (name, schema) in by_name {
                            if schema.is_object() || schema.is_boolean() {
                                in_place.push(format!("{at}/{}", escape(name)));
                            }
                        }
                    }
                    ("$ref", Value::String(reference)) => in_place.push(self.resolve(&at, reference)?),
                    ("$dynamicRef" | "$recursiveRef", _) => {
                        return Err(TooCostly::at(
                            at,
                            format!("`{keyword}` is not supported in tool schemas; use `$ref`"),
                        ));
                    }
                    ("properties", Value::Object(properties)) => {
                        for name in properties.keys() {
                            let step = Step::Name(self.name(name));
                            descend.push((step, format!("{at}/{}", escape(name))));
                        }
                    }
                    ("patternProperties", Value::Object(by_pattern)) => {
                        for pattern in by_pattern.keys() {
                            descend.push((Step::AnyName, format!("{at}/{}", escape(pattern))));
                        }
                    }
                    ("additionalProperties" | "unevaluatedProperties", _) => descend.push((Step::AnyName, at)),
                    ("propertyNames", _) => descend.push((Step::Key, at)),
                    ("prefixItems" | "items", Value::Array(tuple)) => {
                        check_width(&at, keyword, tuple.len())?;
                        for index in 0..tuple.len() {
                            descend.push((Step::Index(index), format!("{at}/{index}")));
                        }
                    }
                    ("items" | "additionalItems" | "contains" | "unevaluatedItems", _) => {
                        descend.push((Step::AnyIndex, at));
                    }
                    _ => {}
                }
            }
            let in_place = in_place.into_iter().map(|p| self.node(p, &mut queue)).collect();
            let descend = descend.into_iter().map(|(step, p)| (step, self.node(p, &mut queue))).collect();
            self.nodes[id].in_place = in_place;
            self.nodes[id].descend = descend;
        }
        Ok(())
    }

    /// The pointer a local `$ref` leads to.
    fn resolve(&self, at: &str, reference: &str) -> Result<String, TooCostly> {
        let unfollowable = || {
            TooCostly::at(
                at,
                format!(
                    "toolhost cannot follow `$ref` `{reference}` to bound the schema's cost; refer to `#/$defs/...` within the schema"
                ),
            )
        };
        let (resource, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let resource = resource.strip_prefix("toolhost:///").unwrap_or(resource);
        let base = if resource.is_empty() {
            String::new()
        } else {
            let found = self.resources.get(resource).or_else(|| self.resources.get(&format!("toolhost:///{resource}")));
            found.cloned().ok_or_else(unfollowable)?
        };
        let target = if fragment.is_empty() {
            base
        } else if fragment.starts_with('/') {
            format!("{base}{}", percent_encoding::percent_decode_str(fragment).decode_utf8_lossy())
        } else {
            self.anchors.get(fragment).cloned().ok_or_else(unfollowable)?
        };
        match self.root.pointer(&target) {
            Some(Value::Object(_) | Value::Bool(_)) => Ok(target),
            _ => Err(unfollowable()),
        }
    }

    /// For every node: the evaluations it costs at one place (itself and
    /// everything it evaluates in place), and the descents it makes from
    /// there, counted per path. A cycle of in-place edges is endless
    /// recursion and is refused.
    fn in_place_costs(&self) -> Result<(Vec<u64>, Vec<Descents>), TooCostly> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let n = self.nodes.len();
        let mut local = vec![0u64; n];
        let mut descents: Vec<Descents> = vec![Descents::new(); n];
        let mut marks = vec![Mark::New; n];
        let mut work = 0u64;
        for start in 0..n {
            if marks[start] != Mark::New {
                continue;
            }
            // (node, index of the next in-place child to visit)
            let mut stack = vec![(start, 0usize)];
            marks[start] = Mark::Open;
            while let Some(&mut (id, ref mut next)) = stack.last_mut() {
                if let Some(&child) = self.nodes[id].in_place.get(*next) {
                    *next += 1;
                    match marks[child] {
                        Mark::Open => {
                            return Err(TooCostly::at(
                                self.nodes[id].pointer.clone(),
                                "this subschema refers back to itself without descending into the instance: endless recursion",
                            ));
                        }
                        Mark::New => {
                            marks[child] = Mark::Open;
                            stack.push((child, 0));
                        }
                        Mark::Done => {}
                    }
                    continue;
                }
                stack.pop();
                let node = &self.nodes[id];
                let mut cost = 1u64;
                let mut own = Descents::new();
                for &(step, target) in &node.descend {
                    let count = own.entry((step, target)).or_insert(0);
                    *count = (*count + 1).min(CAP);
                }
                for &child in &node.in_place {
                    cost = (cost + local[child]).min(CAP);
                    work += descents[child].len() as u64 + 1;
                    for (&key, &count) in &descents[child] {
                        let total = own.entry(key).or_insert(0);
                        *total = (*total + count).min(CAP);
                    }
                }
                if work > MAX_ANALYSIS_WORK {
                    return Err(too_complex());
                }
                if cost > MAX_EVALUATIONS {
                    return Err(TooCostly::at(
                        node.pointer.clone(),
                        format!(
                            "evaluating this subschema can take more than {MAX_EVALUATIONS} subschema evaluations at one place of an instance (`allOf`/`anyOf`/`oneOf` and `$ref` multiply)"
                        ),
                    ));
                }
                local[id] = cost;
                descents[id] = own;
                marks[id] = Mark::Done;
            }
        }
        Ok((local, descents))
    }

    /// The most evaluations at one place of an instance, over every depth:
    /// places are followed from the root one step at a time, keeping per
    /// label of the last step how many paths reach each subschema there
    /// (the most over earlier labels), which bounds every real place from
    /// above.
    fn per_place_bound(&self, local: &[u64], descents: &[Descents]) -> Result<u64, TooCostly> {
        let mut worst = local.first().copied().unwrap_or(1);
        let mut places: BTreeMap<Place, BTreeMap<usize, u64>> = BTreeMap::new();
        places.insert(Place::OtherName, BTreeMap::from([(0, 1)]));
        let mut work = 0u64;
        for depth in 1..=MAX_INSTANCE_DEPTH {
            let mut next: BTreeMap<Place, BTreeMap<usize, u64>> = BTreeMap::new();
            let mut other_name: BTreeMap<usize, u64> = BTreeMap::new();
            let mut other_index: BTreeMap<usize, u64> = BTreeMap::new();
            for reached in places.values() {
                // What this place's subschemas evaluate at each kind of child.
                let mut named: BTreeMap<Place, BTreeMap<usize, u64>> = BTreeMap::new();
                let mut any_name: BTreeMap<usize, u64> = BTreeMap::new();
                let mut any_index: BTreeMap<usize, u64> = BTreeMap::new();
                for (&node, &paths) in reached {
                    work += descents[node].len() as u64 + 1;
                    for (&(step, target), &count) in &descents[node] {
                        let into = match step {
                            Step::Name(name) => named.entry(Place::Name(name)).or_default(),
                            Step::Index(index) => named.entry(Place::Index(index)).or_default(),
                            Step::Key => named.entry(Place::Key).or_default(),
                            Step::AnyName => &mut any_name,
                            Step::AnyIndex => &mut any_index,
                        };
                        add(into, target, paths.saturating_mul(count));
                    }
                }
                if work > MAX_ANALYSIS_WORK {
                    return Err(too_complex());
                }
                let none = BTreeMap::new();
                for (place, mut targets) in named {
                    let wildcard = match place {
                        Place::Name(_) => &any_name,
                        Place::Index(_) => &any_index,
                        _ => &none,
                    };
                    for (&target, &count) in wildcard {
                        add(&mut targets, target, count);
                    }
                    max_into(next.entry(place).or_default(), &targets);
                }
                max_into(&mut other_name, &any_name);
                max_into(&mut other_index, &any_index);
            }
            // A named child gets what any child gets, at least.
            for (place, targets) in next.iter_mut() {
                match place {
                    Place::Name(_) => max_into(targets, &other_name),
                    Place::Index(_) => max_into(targets, &other_index),
                    _ => {}
                }
            }
            if !other_name.is_empty() {
                next.insert(Place::OtherName, other_name);
            }
            if !other_index.is_empty() {
                next.insert(Place::OtherIndex, other_index);
            }
            for targets in next.values() {
                let cost = targets
                    .iter()
                    .fold(0u64, |sum, (&node, &paths)| sum.saturating_add(paths.saturating_mul(local[node])));
                if cost > MAX_EVALUATIONS {
                    let heaviest = targets
                        .iter()
                        .max_by_key(|(node, paths)| paths.saturating_mul(local[**node]))
                        .map_or(String::new(), |(node, _)| self.nodes[*node].pointer.clone());
                    return Err(TooCostly::at(
                        heaviest,
                        format!(
                            "at depth {depth} of an instance, one place can take more than {MAX_EVALUATIONS} subschema evaluations (branches that reach the same subschema multiply)"
                        ),
                    ));
                }
                worst = worst.max(cost);
            }
            if next.is_empty() || next == places {
                break;
            }
            places = next;
        }
        Ok(worst.max(1))
    }
}

fn check_width(at: &str, keyword: &str, width: usize) -> Result<(), TooCostly> {
    if width > MAX_WIDTH {
        return Err(TooCostly::at(at, format!("`{keyword}` lists {width} subschemas, more than {MAX_WIDTH}")));
    }
    Ok(())
}

fn too_complex() -> TooCostly {
    TooCostly::at(
        "",
        "the schema is too intricate for toolhost to bound its cost; simplify its `$ref`s and combinators",
    )
}

fn add(into: &mut BTreeMap<usize, u64>, node: usize, count: u64) {
    let total = into.entry(node).or_insert(0);
    *total = total.saturating_add(count).min(CAP);
}

fn max_into(into: &mut BTreeMap<usize, u64>, from: &BTreeMap<usize, u64>) {
    for (&node, &count) in from {
        let total = into.entry(node).or_insert(0);
        *total = (*total).max(count);
    }
}

/// Keywords whose check reads a string's bytes (rather than its type):
/// matching, measuring, comparing, hashing or decoding it. A schema with
/// none of them checks a string of any length in one step.
const READING_TEXT: [&str; 9] = [
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "const",
    "enum",
    "uniqueItems",
    "contentEncoding",
    "contentMediaType",
];

/// Whether checking an instance against `schema` may read its strings'
/// bytes: whether a keyword of [`READING_TEXT`] appears anywhere in it (a
/// property merely named so counts too, which only errs on the side of
/// weighing). Walks the whole document: run it on one that
/// [`check_document`] bounded.
pub(crate) fn reads_text(schema: &Value) -> bool {
    let mut stack = vec![schema];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if READING_TEXT.iter().any(|keyword| map.contains_key(*keyword)) {
                    return true;
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    false
}

/// Whether checking `instance` against a schema of `cost` per place can
/// cost at most `budget` (its [`weight`] times `cost`; `text`: the schema
/// reads strings, [`reads_text`]). Looks at no more of the instance than
/// that takes.
pub(crate) fn fits(instance: &Value, cost: u64, text: bool, budget: u64) -> bool {
    let cost = cost.max(1);
    weight(instance, budget / cost, text).saturating_mul(cost) <= budget
}

/// How many evaluation places an instance has, up to `limit`, past which
/// counting stops. Object keys weigh more when long (looking one up hashes
/// it; `patternProperties` and `propertyNames` match it), and so do
/// strings when `text` says the schema reads them ([`reads_text`]): a
/// `pattern` runs over every byte, one place per 64 of them.
fn weight(instance: &Value, limit: u64, text: bool) -> u64 {
    let mut total = 0u64;
    // (On the stack while small: every call weighs its arguments and its
    // structured result, most of them a few values.)
    let mut stack: smallvec::SmallVec<[&Value; 16]> = smallvec::smallvec![instance];
    while let Some(value) = stack.pop() {
        total += 1;
        match value {
            Value::String(chars) if text => total += chars.len() as u64 / 64,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                // (One walk of the map, its keys and values together.)
                for (key, value) in map {
                    total += key.len() as u64 / 64;
                    stack.push(value);
                }
            }
            _ => {}
        }
        if total > limit {
            break;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    /// `anyOf` of two `$ref`s to the next definition, `levels` deep.
    fn doubling(levels: usize) -> Value {
        let mut defs = Map::new();
        for i in 0..levels {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(format!("d{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next, "type": "object"}]}));
        }
        defs.insert(format!("d{levels}"), json!({"type": "string"}));
        json!({"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}})
    }

    #[test]
    fn ordinary_schemas_cost_little() {
        let calculator = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        assert!(evaluations(&calculator).unwrap() <= 3);
        let tree = json!({
            "$defs": {"node": {"type": "object", "properties": {
                "left": {"$ref": "#/$defs/node"},
                "right": {"$ref": "#/$defs/node"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            }}},
            "$ref": "#/$defs/node"
        });
        let cost = evaluations(&tree).unwrap();
        assert!(cost < 20, "{cost}");
    }

    #[test]
    fn ref_fan_out_is_refused_with_its_pointer() {
        assert!(evaluations(&doubling(8)).is_ok());
        let refused = evaluations(&doubling(20)).unwrap_err();
        assert!(refused.pointer.starts_with("/$defs/d"), "{refused:?}");
        assert!(refused.message.contains("more than 10000"), "{refused:?}");
    }

    #[test]
    fn recursion_that_multiplies_per_level_is_refused() {
        let schema = json!({"anyOf": [
            {"properties": {"a": {"$ref": "#"}}},
            {"properties": {"a": {"$ref": "#"}}, "type": "object"}
        ]});
        let refused = evaluations(&schema).unwrap_err();
        assert!(refused.message.contains("at depth"), "{refused:?}");
        let endless = json!({"anyOf": [{"$ref": "#"}]});
        assert!(evaluations(&endless).unwrap_err().message.contains("endless recursion"));
    }

    #[test]
    fn documents_are_bounded() {
        let mut deep = json!({"type": "object"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        assert!(check_document(&deep).unwrap_err().message.contains("nests deeper"));
        let wide = json!({"anyOf": vec![json!({"type": "string"}); 300]});
        assert_eq!(evaluations(&wide).unwrap_err().pointer, "/anyOf");
        let big = json!({"enum": vec![json!(1); MAX_VALUES + 1]});
        assert!(check_document(&big).unwrap_err().message.contains("JSON values"));
    }

    #[test]
    fn only_schemas_that_read_strings_weigh_them_by_length() {
        let typed = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        assert!(!reads_text(&typed));
        for keyword in READING_TEXT {
            let mut reading = typed.clone();
            reading["properties"]["text"][keyword] = json!(1);
            assert!(reads_text(&reading), "{keyword}");
        }
        // Found at any depth, in arrays too.
        assert!(reads_text(&json!({"anyOf": [{"$defs": {"d": {"pattern": "^a"}}}]})));

        let instance = json!({"text": "a".repeat(64_000)});
        // The object and the string: two places unread...
        assert_eq!(weight(&instance, u64::MAX, false), 2);
        // ...and the string 1,000 more when a keyword reads it.
        assert_eq!(weight(&instance, u64::MAX, true), 1_002);
        // A long key weighs by its length either way.
        let keyed = json!({"k".repeat(6_400): 1});
        assert_eq!(weight(&keyed, u64::MAX, false), 102);
        // Counting stops past the limit.
        assert!(weight(&json!(vec![0; 1_000]), 10, false) <= 11);
    }
}
