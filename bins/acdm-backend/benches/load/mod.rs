//! What the service benchmarks share: a closed-loop load generator (N
//! keep-alive clients, each sending its next request when the last one is
//! answered, after a warm-up), percentiles, the knobs, and the table.

use std::future::Future;
use std::time::{Duration, Instant};

/// The warm-up before measuring.
pub(crate) const WARM_UP: Duration = Duration::from_secs(1);

/// What one scenario measured.
pub(crate) struct Outcome {
    pub(crate) latencies: Vec<Duration>,
    pub(crate) failures: Vec<String>,
    pub(crate) elapsed: Duration,
}

/// A number from the environment, or `default`.
pub(crate) fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {value:?}")),
        Err(_) => default,
    }
}

/// Runs `concurrency` clients, each calling `send` in a loop, for
/// `duration` after [`WARM_UP`]; a client stops at its first failure.
pub(crate) async fn run<F, Fut>(concurrency: usize, duration: Duration, send: F) -> Outcome
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let warm_until = Instant::now() + WARM_UP;
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let send = send.clone();
        workers.push(tokio::spawn(async move {
            while Instant::now() < warm_until {
                send().await?;
            }
            let stop = warm_until + duration;
            let mut latencies = Vec::with_capacity(16_384);
            while Instant::now() < stop {
                let started = Instant::now();
                send().await?;
                latencies.push(started.elapsed());
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut outcome = Outcome {
        latencies: Vec::new(),
        failures: Vec::new(),
        elapsed: duration,
    };
    for worker in workers {
        match worker.await {
            Ok(Ok(latencies)) => outcome.latencies.extend(latencies),
            Ok(Err(failure)) => outcome.failures.push(failure),
            Err(join) => outcome.failures.push(join.to_string()),
        }
    }
    outcome.elapsed = warm_until.elapsed();
    outcome.latencies.sort_unstable();
    outcome
}

/// The `p`-th percentile of sorted latencies, in milliseconds.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// The table's header.
pub(crate) fn print_header() {
    println!(
        "\n{:<36} {:>9} {:>10} {:>9} {:>9} {:>9}",
        "scenario", "requests", "req/s", "p50 ms", "p99 ms", "max ms"
    );
}

/// One row of the table; returns the throughput, and whether it failed
/// (the first failure is printed).
pub(crate) fn print_row(name: &str, outcome: &Outcome, concurrency: usize) -> (f64, bool) {
    let count = outcome.latencies.len();
    let rate = count as f64 / outcome.elapsed.as_secs_f64();
    println!(
        "{:<36} {:>9} {:>10.0} {:>9.2} {:>9.2} {:>9.2}",
        name,
        count,
        rate,
        percentile(&outcome.latencies, 50.0),
        percentile(&outcome.latencies, 99.0),
        percentile(&outcome.latencies, 100.0),
    );
    if let Some(first) = outcome.failures.first() {
        eprintln!(
            "  {} of {concurrency} clients failed; first failure: {first}",
            outcome.failures.len()
        );
        return (rate, true);
    }
    (rate, false)
}
