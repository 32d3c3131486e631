//! Rate limits on `tools/call` (the specification says servers must rate
//! limit tool invocations): a rate with a burst per client and per tool
//! (GCRA, from `governor`), and a bound on the calls one client has running.
//! A call over a limit is refused at once, never queued: a flooding client
//! holds no more of the server than its limits, and others keep theirs.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota};

use crate::settings::{Rate, RateLimits};

/// The JSON-RPC error code of a call refused by a limit (in the range
/// JSON-RPC leaves to servers).
pub const RATE_LIMITED: i32 = crate::jsonrpc::LIMITED;

/// Which limit refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// The client's rate.
    Client,
    /// The client's calls running at once.
    Concurrent,
    /// The tool's rate.
    Tool,
}

impl LimitKind {
    /// Its name in messages and metrics.
    pub fn label(self) -> &'static str {
        match self {
            LimitKind::Client => "per_client",
            LimitKind::Concurrent => "concurrent_per_client",
            LimitKind::Tool => "per_tool",
        }
    }
}

/// A call refused by a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Limited {
    /// The limit.
    pub kind: LimitKind,
    /// When a retry could pass (rates; `None` for concurrency).
    pub retry_after: Option<Duration>,
    /// What the client is told.
    pub message: String,
}

/// The calls each client has running.
type Running = Arc<Mutex<HashMap<String, u32>>>;

/// Holds one of a client's running calls; dropping it ends the call.
#[derive(Debug)]
pub struct Permit {
    running: Option<(Running, String)>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some((running, client)) = self.running.take() {
            let mut running = running.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(count) = running.get_mut(&client) {
                *count -= 1;
                if *count == 0 {
                    running.remove(&client);
                }
            }
        }
    }
}

/// How often the keyed limiters forget clients and tools that are back to
/// a full burst (so many one-off clients do not grow them for ever).
const PRUNE_EVERY: u64 = 4096;

/// The limits of one server.
pub struct Limiter {
    limits: RateLimits,
    clients: Option<DefaultKeyedRateLimiter<String>>,
    tools: Option<DefaultKeyedRateLimiter<String>>,
    single: HashMap<String, DefaultDirectRateLimiter>,
    running: Running,
    checks: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter").field("limits", &self.limits).finish_non_exhaustive()
    }
}

fn quota(rate: &Rate) -> Quota {
    let per_second = rate.per_second.clamp(1e-6, 1e6);
    let burst = rate.burst.unwrap_or(per_second.ceil() as u32).max(1);
    let period = Duration::from_secs_f64(1.0 / per_second).max(Duration::from_nanos(1));
    Quota::with_period(period)
        .expect("a period of at least a nanosecond")
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN))
}

fn describe(rate: &Rate) -> String {
    let burst = rate.burst.unwrap_or(rate.per_second.ceil() as u32).max(1);
    format!("{} calls/s, burst {burst}", rate.per_second)
}

impl Limiter {
    /// Limits as `limits` say.
    pub fn new(limits: RateLimits) -> Limiter {
        Limiter {
            clients: limits.per_client.as_ref().map(|rate| governor::RateLimiter::keyed(quota(rate))),
            tools: limits.per_tool.as_ref().map(|rate| governor::RateLimiter::keyed(quota(rate))),
            single: limits
                .tools
                .iter()
                .map(|(name, rate)| (name.clone(), governor::RateLimiter::direct(quota(rate))))
                .collect(),
            running: Default::default(),
            checks: Default::default(),
            limits,
        }
    }

    /// Admit a call of `tool` by `client`, or say which limit refuses it.
    /// The permit holds the call's place among the client's running calls.
    /// `tool` is `None` for a name the server does not serve: the client's
    /// limits apply, and no per-tool state is made for a made-up name.
    pub fn admit(&self, client: &str, tool: Option<&str>) -> Result<Permit, Limited> {
        let checks = self.checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if checks % PRUNE_EVERY == PRUNE_EVERY - 1 {
            for limiter in [&self.clients, &self.tools].into_iter().flatten() {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        }
        let now = DefaultClock::default().now();
        let refused = |kind, rate: &Rate, not_until: governor::NotUntil<_>, whose: String| {
            let wait = not_until.wait_time_from(now);
            Limited {
                kind,
                retry_after: Some(wait),
                message: format!(
                    "rate limit: {whose} is limited to {}; retry in {} ms",
                    describe(rate),
                    wait.as_millis().max(1)
                ),
            }
        };
        let mut permit = Permit { running: None };
        if let Some(most) = self.limits.concurrent_per_client {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            let count = running.entry(client.to_owned()).or_insert(0);
            if *count >= most {
                return Err(Limited {
                    kind: LimitKind::Concurrent,
                    retry_after: None,
                    message: format!(
                        "rate limit: client `{client}` already has {most} calls running, its most at once; retry when one ends"
                    ),
                });
            }
            *count += 1;
            permit.running = Some((Arc::clone(&self.running), client.to_owned()));
        }
        if let (Some(limiter), Some(rate)) = (&self.clients, &self.limits.per_client) {
            limiter
                .check_key(&client.to_owned())
                .map_err(|n| refused(LimitKind::Client, rate, n, format!("client `{client}`")))?;
        }
        let Some(tool) = tool else { return Ok(permit) };
        match self.single.get(tool) {
            Some(limiter) => {
                let rate = &self.limits.tools[tool];
                limiter.check().map_err(|n| refused(LimitKind::Tool, rate, n, format!("tool `{tool}`")))?;
            }
            None => {
                if let (Some(limiter), Some(rate)) = (&self.tools, &self.limits.per_tool) {
                    limiter
                        .check_key(&tool.to_owned())
                        .map_err(|n| refused(LimitKind::Tool, rate, n, format!("tool `{tool}`")))?;
                }
            }
        }
        Ok(permit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64, burst: u32) -> Rate {
        Rate { per_second, burst: Some(burst) }
    }

    #[test]
    fn a_client_past_its_burst_is_refused_and_another_is_not() {
        let limiter = Limiter::new(RateLimits { per_client: Some(rate(0.001, 3)), ..Default::default() });
        for _ in 0..3 {
            limiter.admit("a", Some("t")).expect("within the burst");
        }
        let refused = limiter.admit("a", Some("t")).expect_err("past the burst");
        assert_eq!(refused.kind, LimitKind::Client);
        assert!(refused.message.contains("client `a`"), "{}", refused.message);
        assert!(refused.retry_after.is_some_and(|wait| wait > Duration::from_secs(1)));
        limiter.admit("b", Some("t")).expect("another client has its own burst");
    }

    #[test]
    fn running_calls_are_bounded_per_client_and_released_when_done() {
        let limiter = Limiter::new(RateLimits { concurrent_per_client: Some(2), ..Default::default() });
        let first = limiter.admit("a", Some("t")).expect("first");
        let _second = limiter.admit("a", Some("t")).expect("second");
        assert_eq!(limiter.admit("a", Some("t")).expect_err("third").kind, LimitKind::Concurrent);
        let _other = limiter.admit("b", Some("t")).expect("another client");
        drop(first);
        let _third = limiter.admit("a", Some("t")).expect("a place was freed");
    }

    #[test]
    fn a_tools_own_limit_replaces_the_default() {
        let limits = RateLimits {
            per_tool: Some(rate(0.001, 1)),
            tools: [("x__slow".to_owned(), rate(0.001, 2))].into(),
            ..Default::default()
        };
        let limiter = Limiter::new(limits);
        limiter.admit("a", Some("x__slow")).expect("1");
        limiter.admit("b", Some("x__slow")).expect("2: its own burst is 2");
        assert_eq!(limiter.admit("c", Some("x__slow")).expect_err("3").kind, LimitKind::Tool);
        limiter.admit("a", Some("x__fast")).expect("the default's burst");
        limiter.admit("a", Some("x__fast")).expect_err("past the default's burst of 1");
    }
}
