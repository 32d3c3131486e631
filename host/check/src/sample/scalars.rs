//! Scalars generated from a schema: integers and numbers within its bounds
//! (and those its `format` implies), at their edges for the minimal and
//! maximal shapes; strings of its format, of its pattern or of its lengths,
//! made of plain and tricky characters.

use rand::{RngExt as _, seq::IndexedRandom as _};
use serde_json::{Map, Number, Value, json};

use super::{MAX_STRING_CHARS, Sampler, Shape, count, number};

/// How far past `minLength` strings grow when `maxLength` does not say.
const EXTRA_CHARS: usize = 40;
/// Longest repetition a `pattern` is expanded to.
const PATTERN_REPEAT: u32 = 8;
/// Integers drawn when a schema sets no bounds.
const DEFAULT_INT_RANGE: i64 = 1_000_000;
/// The largest integer a double holds exactly (2^53 - 1).
const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;
/// Characters strings are made of: plain text first, then the characters
/// that break careless code (non-ASCII, astral, quotes, control characters).
const PLAIN: &[char] = &['a', 'b', 'c', 'x', 'y', 'z', 'E', 'Q', '0', '7', ' ', '-', '_', '.'];
const TRICKY: &[char] = &['é', 'ß', 'Ж', '日', '本', '🦀', '\u{301}', '"', '\\', '\'', '\n', '\t', '<', '&', '\u{0}'];

impl Sampler<'_> {
    /// An integer the schema allows, leaning as `shape` says.
    pub(super) fn integer(&mut self, schema: &Map<String, Value>, shape: Shape) -> Option<i64> {
        let (mut lo, mut hi) = format_bounds(schema.get("format").and_then(Value::as_str));
        if let Some(min) = number(schema, "minimum") {
            lo = lo.max(clamp_ceil(min));
        }
        if let Some(min) = number(schema, "exclusiveMinimum") {
            lo = lo.max(clamp_floor(min).saturating_add(1));
        }
        if let Some(max) = number(schema, "maximum") {
            hi = hi.min(clamp_floor(max));
        }
        if let Some(max) = number(schema, "exclusiveMaximum") {
            hi = hi.min(clamp_ceil(max).saturating_sub(1));
        }
        if lo > hi {
            return None;
        }
        if let Some(step) = number(schema, "multipleOf").filter(|s| *s >= 1.0 && s.fract() == 0.0) {
            let step = step as i64;
            let (first, last) = (lo.div_euclid(step) + i64::from(lo.rem_euclid(step) != 0), hi.div_euclid(step));
            if first > last {
                return None;
            }
            let k = self.int_between(first, last, shape, false);
            return k.checked_mul(step);
        }
        let bounded = lo != i64::MIN || hi != i64::MAX;
        Some(self.int_between(lo, hi, shape, !bounded || lo == i64::MIN || hi == i64::MAX))
    }

    /// An integer in `lo..=hi`, at an edge for the minimal and maximal
    /// shapes; `open` says a side is unbounded (then edges are large but
    /// exact as doubles, and random values stay moderate).
    fn int_between(&mut self, lo: i64, hi: i64, shape: Shape, open: bool) -> i64 {
        let soft_lo = if lo == i64::MIN { (-MAX_SAFE_INTEGER).max(lo) } else { lo };
        let soft_hi = if hi == i64::MAX { MAX_SAFE_INTEGER.min(hi) } else { hi };
        match shape {
            Shape::Minimal if lo == i64::MIN => 0.clamp(lo, hi),
            Shape::Minimal => lo,
            Shape::Maximal => soft_hi,
            Shape::Random => {
                if self.rng.random_bool(0.35) {
                    let edges = [lo, hi, soft_lo, soft_hi, 0, 1, -1, i64::from(i32::MAX), i64::from(i32::MIN)];
                    let fitting: Vec<i64> = edges.into_iter().filter(|e| (lo..=hi).contains(e)).collect();
                    if let Some(edge) = fitting.choose(self.rng) {
                        return *edge;
                    }
                }
                let (a, b) = if open {
                    (soft_lo.max(-DEFAULT_INT_RANGE).min(soft_hi), soft_hi.min(DEFAULT_INT_RANGE).max(soft_lo))
                } else {
                    (soft_lo, soft_hi)
                };
                self.rng.random_range(a..=b.max(a))
            }
        }
    }

    /// A number the schema allows, leaning as `shape` says.
    pub(super) fn number(&mut self, schema: &Map<String, Value>, shape: Shape) -> Option<Value> {
        if let Some(step) = number(schema, "multipleOf") {
            // Whole multiples of the step, in bounds: integers scaled.
            let mut scaled = Map::new();
            for (key, op) in [
                ("minimum", f64::ceil as fn(f64) -> f64),
                ("maximum", f64::floor),
                ("exclusiveMinimum", f64::floor),
                ("exclusiveMaximum", f64::ceil),
            ] {
                if let Some(bound) = number(schema, key) {
                    scaled.insert(key.to_owned(), json!(op(bound / step)));
                }
            }
            let k = self.integer(&scaled, shape)?;
            return Number::from_f64(k as f64 * step).map(Value::Number);
        }
        let nudge = |x: f64| (x.abs() * 1e-9).max(1e-6);
        let lo = number(schema, "minimum").or_else(|| number(schema, "exclusiveMinimum").map(|x| x + nudge(x)));
        let hi = number(schema, "maximum").or_else(|| number(schema, "exclusiveMaximum").map(|x| x - nudge(x)));
        let value = match (shape, lo, hi) {
            (_, Some(lo), Some(hi)) if lo > hi => return None,
            (Shape::Minimal, Some(lo), _) => lo,
            (Shape::Minimal, None, hi) => 0f64.min(hi.unwrap_or(0.0)),
            (Shape::Maximal, _, Some(hi)) => hi,
            (Shape::Maximal, lo, None) => 1e15f64.max(lo.unwrap_or(0.0)),
            (Shape::Random, lo, hi) => {
                let edges = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-9, -1e-9, 1e15, -1e15, std::f64::consts::PI];
                let fitting: Vec<f64> = edges
                    .into_iter()
                    .chain(lo)
                    .chain(hi)
                    .filter(|e| lo.is_none_or(|lo| *e >= lo) && hi.is_none_or(|hi| *e <= hi))
                    .collect();
                match fitting.choose(self.rng) {
                    Some(edge) if self.rng.random_bool(0.35) => *edge,
                    _ => {
                        let a = lo.unwrap_or_else(|| hi.map_or(-1e6, |hi| hi - 1e6));
                        let b = hi.unwrap_or(a + 2e6).max(a);
                        if (b - a).is_finite() {
                            self.rng.random_range(a..=b)
                        } else {
                            // A range wider than the largest double (a
                            // plugin's `-1e308` to `1e308`), which
                            // `random_range` refuses: a point between, by
                            // weights that never overflow.
                            let t: f64 = self.rng.random();
                            (a * (1.0 - t) + b * t).clamp(a, b)
                        }
                    }
                }
            }
        };
        Number::from_f64(value).map(Value::Number)
    }

    /// A string the schema allows, leaning as `shape` says.
    pub(super) fn string(&mut self, schema: &Map<String, Value>, shape: Shape) -> Option<String> {
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && let Some(examples) = format_examples(format)
        {
            return Some(self.pick_str(examples, shape));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            match pattern_generator(pattern) {
                Ok(Some(generator)) => {
                    let text: String = self.rng.sample(&generator);
                    return self.charge(text.len()).then_some(text);
                }
                Ok(None) => {}
                Err(longest) => {
                    self.within("pattern", longest, MAX_STRING_CHARS, "characters");
                    return None;
                }
            }
        }
        let min = count(schema, "minLength").unwrap_or(0);
        if !self.within("minLength", min, MAX_STRING_CHARS, "characters") {
            return None;
        }
        let max = count(schema, "maxLength").unwrap_or(usize::MAX).max(min);
        let len = match shape {
            Shape::Minimal => min,
            Shape::Maximal => max.min(min + EXTRA_CHARS),
            Shape::Random => self.rng.random_range(min..=max.min(min + EXTRA_CHARS)),
        };
        if !self.charge(len) {
            return None;
        }
        Some(match shape {
            Shape::Minimal => "a".repeat(len),
            Shape::Maximal => (0..len).map(|i| TRICKY[i % TRICKY.len()]).collect(),
            Shape::Random => {
                let tricky = self.rng.random_bool(0.3);
                (0..len)
                    .map(|_| {
                        let pool = if tricky && self.rng.random_bool(0.4) { TRICKY } else { PLAIN };
                        *pool.choose(self.rng).unwrap_or(&'a')
                    })
                    .collect()
            }
        })
    }

    fn pick_str(&mut self, options: &[&str], shape: Shape) -> String {
        match shape {
            Shape::Minimal => options[0],
            Shape::Maximal => options[options.len() - 1],
            Shape::Random => options.choose(self.rng).copied().unwrap_or(options[0]),
        }
        .to_owned()
    }
}

fn clamp_ceil(x: f64) -> i64 {
    // `as` saturates at the i64 range.
    x.ceil() as i64
}

fn clamp_floor(x: f64) -> i64 {
    x.floor() as i64
}

/// The range an integer `format` implies (schemars emits these for Rust's
/// integer types, some without `minimum`/`maximum`).
fn format_bounds(format: Option<&str>) -> (i64, i64) {
    match format {
        Some("int8") => (i8::MIN.into(), i8::MAX.into()),
        Some("int16") => (i16::MIN.into(), i16::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("uint8") => (0, u8::MAX.into()),
        Some("uint16") => (0, u16::MAX.into()),
        Some("uint32") => (0, u32::MAX.into()),
        Some("uint64" | "uint") => (0, i64::MAX),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Values of the formats JSON Schema defines, plainest first.
fn format_examples(format: &str) -> Option<&'static [&'static str]> {
    Some(match format {
        "date-time" => &["1970-01-01T00:00:00Z", "2024-02-29T23:59:59.999+05:30", "2038-01-19T03:14:08-08:00"],
        "date" => &["1970-01-01", "2024-02-29", "9999-12-31"],
        "time" => &["00:00:00Z", "12:30:45.5+01:00", "23:59:59-07:00"],
        "duration" => &["P1D", "PT1H30M", "P1Y2M3DT4H5M6S"],
        "email" => &["a@example.com", "first.last+tag@sub.example.org"],
        "idn-email" => &["a@example.com", "jörg@bücher.example"],
        "hostname" => &["localhost", "example.com", "a-b.c-d.example.org"],
        "idn-hostname" => &["example.com", "bücher.example"],
        "ipv4" => &["127.0.0.1", "0.0.0.0", "255.255.255.255"],
        "ipv6" => &["::1", "2001:db8::8a2e:370:7334", "fe80::1"],
        "uri" | "iri" => &["https://example.com/", "https://example.com/a/b?c=d#e", "urn:isbn:0451450523"],
        "uri-reference" | "iri-reference" => &["/", "../a/b?c=d", "https://example.com/x"],
        "uri-template" => &["https://example.com/{id}", "/search{?q,lang}"],
        "uuid" => &["00000000-0000-0000-0000-000000000000", "123e4567-e89b-12d3-a456-426614174000"],
        "json-pointer" => &["", "/a/0", "/a~1b/c~0d"],
        "relative-json-pointer" => &["0", "1/a", "2#"],
        "regex" => &["^a+$", "[0-9]{2,4}"],
        _ => return None,
    })
}

/// A generator for strings matching `pattern`. JSON Schema patterns are not
/// anchored, so leading `^` and trailing `$` change nothing about which
/// generated strings match; the generator does not support them, so they go.
/// `Ok(None)` when the generator cannot follow the pattern; `Err` with the
/// longest string it could make when that is more than [`MAX_STRING_CHARS`]
/// (`a{1000}{1000}{1000}`: the generator would build it in memory).
fn pattern_generator(pattern: &str) -> Result<Option<rand_regex::Regex>, usize> {
    let mut core = pattern.strip_prefix('^').unwrap_or(pattern);
    if let Some(stripped) = core.strip_suffix('$')
        && !stripped.ends_with('\\')
    {
        core = stripped;
    }
    let Ok(hir) = regex_syntax::Parser::new().parse(core) else { return Ok(None) };
    let longest = longest_match(&hir);
    if longest > MAX_STRING_CHARS as u64 {
        return Err(usize::try_from(longest).unwrap_or(usize::MAX));
    }
    Ok(rand_regex::Regex::with_hir(hir, PATTERN_REPEAT).ok())
}

/// The longest string the generator makes for `hir`, in bytes, saturating
/// (an empty repeated group counts one per repetition, so that huge counts
/// are caught even there).
fn longest_match(hir: &regex_syntax::hir::Hir) -> u64 {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(literal) => literal.0.len() as u64,
        HirKind::Class(_) => 4,
        HirKind::Capture(capture) => longest_match(&capture.sub),
        HirKind::Repetition(repetition) => {
            let times = repetition.max.unwrap_or(repetition.min.saturating_add(PATTERN_REPEAT));
            longest_match(&repetition.sub).max(1).saturating_mul(u64::from(times))
        }
        HirKind::Concat(parts) => parts.iter().map(longest_match).fold(0, u64::saturating_add),
        HirKind::Alternation(branches) => branches.iter().map(longest_match).max().unwrap_or(0),
    }
}
