//! The HTTP bench's tables: one per concurrency, each scenario's figures
//! next to the one-hop floor's, and the targets read off them.
//!
//! The floor runs first and again last at each concurrency; its req/s is
//! the mean of the two runs, so a machine that got busier or quieter
//! during the block moves both ends alike. Its p99 is the lower of the
//! two: nginx's proxy has runs where a few hundred answers wait 40–100 ms
//! for a delayed ACK (seen on loopback, with nginx alone on the machine),
//! and a floor run hit by them would make any service's tail look short.
//! The scenarios the targets name run twice as well and are read the same
//! way: a tail read as the better of two runs on one side and off a
//! single run on the other would favour the side measured twice.
//! Ratios are req/s over the floor's req/s; "p99 over floor" is the p99
//! minus the floor's p99.
//!
//! Closed-loop, every run saturates what it measures: the load is what
//! the server carries, a row's median is about the connections over its
//! req/s, and a tail over the floor's restates the gap in req/s. So at
//! [`TAIL_AT`] the floor and the targets also run
//! open-loop, at one offered rate for all (a fraction of the floor's
//! closed-loop req/s): each server carries the same load, and the p99
//! over the floor's is the latency the hop adds at that load. An arrival
//! sent more than a millisecond after it was due is counted (`late`); a
//! target whose runs all had more than [`LATE`] of them did not carry the
//! rate.

use std::fmt::Write as _;
use std::time::Duration;

use crate::bench::procfs::Memory;
use crate::bench::scenario::{FLOOR, FLOOR_AGAIN, TARGETS, again};
use crate::bench::wrk::Figures;
use crate::bench::{SWEEP_BASE, TAIL_AT, cap_text};

/// One measured scenario.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// Its name.
    pub(crate) name: String,
    /// What wrk measured (the warm-up's failures included).
    pub(crate) figures: Figures,
    /// CPU time of the hop (the floor's nginx, or the service) per answer, in µs.
    pub(crate) cpu_us: Option<f64>,
    /// The hop's CPU time over the measured window's length: the cores it
    /// kept busy.
    pub(crate) cpu_cores: Option<f64>,
}

impl Row {
    /// A run's row: its figures and the CPU time `cpu` its hop used over
    /// the measured window (none for the upstream by itself).
    pub(crate) fn new(name: &str, figures: Figures, cpu: Option<Duration>) -> Self {
        let cpu_us = cpu
            .filter(|_| figures.requests > 0)
            .map(|used| used.as_secs_f64() * 1e6 / figures.requests as f64);
        let cpu_cores = cpu
            .filter(|_| !figures.duration.is_zero())
            .map(|used| used.as_secs_f64() / figures.duration.as_secs_f64());
        Self {
            name: name.to_owned(),
            figures,
            cpu_us,
            cpu_cores,
        }
    }
}

/// Every scenario at one concurrency, closed-loop, or the floor and the
/// targets' scenarios open-loop at one offered rate.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// Connections.
    pub(crate) concurrency: usize,
    /// Open-loop: the offered req/s.
    pub(crate) offered: Option<f64>,
    /// The service's `ACDM_UPSTREAM_MAX_CONNECTIONS`; `None`: its default.
    pub(crate) cap: Option<usize>,
    /// The rows, in the order they ran.
    pub(crate) rows: Vec<Row>,
}

/// A scenario measured in one or more runs (the floor and the targets'
/// scenarios run twice) at one concurrency: its req/s (the mean of its
/// runs) and p99 (µs, the lowest of its runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Runs {
    /// How many runs.
    pub(crate) count: usize,
    /// Answers per second.
    pub(crate) rate: f64,
    /// 99th percentile latency, µs: the lowest of the runs that carried
    /// their load (at most [`LATE`] late arrivals), or of all its runs
    /// when none did.
    pub(crate) p99_us: f64,
    /// Median latency (mean of its runs), µs.
    pub(crate) p50_us: f64,
    /// The smallest share of late arrivals among the runs its p99 is read
    /// from (open-loop; 0 closed-loop): above [`LATE`] when no run
    /// carried the offered rate.
    pub(crate) late: f64,
}

impl Runs {
    /// Whether even the better run stalled: a p99 more than [`STALLED`]
    /// times its median, which a proxy that answers from memory reaches
    /// only when answers waited on delayed ACKs. The tail of a block whose
    /// floor stalled so measures the machine, not the service.
    pub(crate) fn stalled(&self) -> bool {
        self.p99_us > STALLED * self.p50_us
    }

    /// "mean of its two runs" and the like.
    fn of_its(&self, what: &str) -> String {
        match self.count {
            1 => "its one run".to_owned(),
            2 => format!("{what} of its two runs"),
            n => format!("{what} of its {n} runs"),
        }
    }
}

/// How many times its median a floor's p99 may be before the block's
/// tails are not read (runs without a stall measure 2–4 times).
const STALLED: f64 = 10.0;

/// The share of late arrivals above which an open-loop run did not carry
/// its offered rate: the waits its latencies do not count are then more
/// than its tail.
pub(crate) const LATE: f64 = 0.01;

/// The share of a run's requests that arrived late.
fn late_share(figures: &Figures) -> f64 {
    if figures.requests == 0 {
        0.0
    } else {
        figures.late as f64 / figures.requests as f64
    }
}

impl Block {
    /// The rows named `first` or `second`, read together.
    fn runs(&self, first: &str, second: &str) -> Option<Runs> {
        let runs: Vec<&Figures> = self
            .rows
            .iter()
            .filter(|r| r.name == first || r.name == second)
            .map(|r| &r.figures)
            .collect();
        if runs.is_empty() {
            return None;
        }
        let n = runs.len() as f64;
        // The tail is read off the runs that carried their load (all of
        // them closed-loop, where nothing arrives late); when none did,
        // off all of them, and `late` says so.
        let carried: Vec<&Figures> = runs
            .iter()
            .copied()
            .filter(|f| late_share(f) <= LATE)
            .collect();
        let read = if carried.is_empty() { &runs } else { &carried };
        Some(Runs {
            count: runs.len(),
            rate: runs.iter().map(|f| f.rate()).sum::<f64>() / n,
            p99_us: read
                .iter()
                .map(|f| f.p99_us as f64)
                .fold(f64::INFINITY, f64::min),
            p50_us: runs.iter().map(|f| f.p50_us as f64).sum::<f64>() / n,
            late: read
                .iter()
                .copied()
                .map(late_share)
                .fold(f64::INFINITY, f64::min),
        })
    }

    /// The floor: the mean req/s of its runs, and their lowest p99.
    pub(crate) fn floor(&self) -> Option<Runs> {
        self.runs(FLOOR, FLOOR_AGAIN)
    }

    /// A target's scenario (its run and its run again), read as the floor.
    pub(crate) fn target(&self, name: &str) -> Option<Runs> {
        self.runs(name, &again(name))
    }

    /// The row named `name`.
    pub(crate) fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The run `name`'s req/s over the floor's.
    pub(crate) fn ratio(&self, name: &str) -> Option<f64> {
        let floor = self.floor()?;
        let row = self.row(name)?;
        (floor.rate > 0.0).then(|| row.figures.rate() / floor.rate)
    }

    /// The run `name`'s p99 minus the floor's, in ms.
    pub(crate) fn added_p99_ms(&self, name: &str) -> Option<f64> {
        let floor = self.floor()?;
        let row = self.row(name)?;
        Some((row.figures.p99_us as f64 - floor.p99_us) / 1000.0)
    }

    /// The target `name`'s mean req/s over the floor's.
    pub(crate) fn target_ratio(&self, name: &str) -> Option<f64> {
        let floor = self.floor()?;
        let target = self.target(name)?;
        (floor.rate > 0.0).then(|| target.rate / floor.rate)
    }

    /// The target `name`'s lower p99 minus the floor's, in ms.
    pub(crate) fn target_added_p99_ms(&self, name: &str) -> Option<f64> {
        let floor = self.floor()?;
        let target = self.target(name)?;
        Some((target.p99_us - floor.p99_us) / 1000.0)
    }

    /// Every failure in the block.
    pub(crate) fn failures(&self) -> u64 {
        self.rows.iter().map(|r| r.figures.failures()).sum()
    }

    /// The block as a markdown table, with a line above it for the floor
    /// and one for each target's scenario.
    pub(crate) fn table(&self, heading: &str) -> String {
        let mut out = String::new();
        let floor = self.floor();
        match self.offered {
            Some(rate) => {
                let _ = writeln!(
                    out,
                    "### C={}, open-loop at {rate:.0} req/s offered — {heading}",
                    self.concurrency
                );
            }
            None => {
                let _ = writeln!(out, "### C={} — {heading}", self.concurrency);
            }
        }
        if let Some(floor) = floor {
            let _ = writeln!(
                out,
                "floor: {:.0} req/s ({}), p99 {:.2} ms ({})",
                floor.rate,
                floor.of_its("mean"),
                floor.p99_us / 1000.0,
                floor.of_its("the lower")
            );
        }
        for name in TARGETS {
            let (Some(target), Some(ratio), Some(added)) = (
                self.target(name),
                self.target_ratio(name),
                self.target_added_p99_ms(name),
            ) else {
                continue;
            };
            let _ = writeln!(
                out,
                "{name}: {:.0} req/s ({}), {ratio:.2} × floor; p99 {:.2} ms ({}), {added:+.2} ms over the floor's",
                target.rate,
                target.of_its("mean"),
                target.p99_us / 1000.0,
                target.of_its("the lower"),
            );
        }
        out.push('\n');
        let open = self.offered.is_some();
        let mut columns = vec![
            "req/s",
            "p50 ms",
            "p99 ms",
            "× floor",
            "p99 over floor ms",
            "hop CPU µs/req",
            "hop CPU cores",
        ];
        if open {
            columns.push("late arrivals");
        }
        columns.push("failed");
        let _ = writeln!(out, "| scenario | {} |", columns.join(" | "));
        let _ = writeln!(out, "|---|{}", "--:|".repeat(columns.len()));
        for row in &self.rows {
            let f = &row.figures;
            let ratio = self
                .ratio(&row.name)
                .map_or("—".to_owned(), |r| format!("{r:.2}"));
            let added = self
                .added_p99_ms(&row.name)
                .map_or("—".to_owned(), |a| format!("{a:+.2}"));
            let cpu = row.cpu_us.map_or("—".to_owned(), |c| format!("{c:.0}"));
            let cores = row.cpu_cores.map_or("—".to_owned(), |c| format!("{c:.2}"));
            let failed = if f.failures() == 0 {
                "0".to_owned()
            } else {
                format!("**{}**", f.failures())
            };
            let late = if open {
                format!(" {} ({:.2} %) |", f.late, late_share(f) * 100.0)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.2} | {:.2} | {ratio} | {added} | {cpu} | {cores} |{late} {failed} |",
                row.name,
                f.rate(),
                f.p50_us as f64 / 1000.0,
                f.p99_us as f64 / 1000.0,
            );
        }
        for row in self.rows.iter().filter(|r| r.figures.failures() > 0) {
            let _ = writeln!(
                out,
                "\nFAILED: {} at C={}{}: {}",
                row.name,
                self.concurrency,
                if open { " open-loop" } else { "" },
                row.figures.failure_summary()
            );
        }
        out
    }
}

/// Resident memory of the service at the moments the bench looks.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryLog {
    /// (moment, memory), in order.
    pub(crate) readings: Vec<(String, Memory)>,
}

impl MemoryLog {
    /// Adds a reading.
    pub(crate) fn note(&mut self, moment: impl Into<String>, memory: Option<Memory>) {
        if let Some(memory) = memory {
            self.readings.push((moment.into(), memory));
        }
    }

    /// The reading at `moment`.
    fn at(&self, moment: &str) -> Option<Memory> {
        self.readings
            .iter()
            .find(|(m, _)| m == moment)
            .map(|(_, memory)| *memory)
    }

    /// The readings in one line.
    pub(crate) fn line(&self) -> String {
        let parts: Vec<String> = self
            .readings
            .iter()
            .map(|(moment, memory)| format!("{moment} {}", mib(memory.rss)))
            .collect();
        let peak = self.readings.last().map_or(0, |(_, m)| m.peak);
        format!(
            "service RSS: {}; peak (VmHWM) {}",
            parts.join(", "),
            mib(peak)
        )
    }
}

/// The moment of the idle reading.
pub(crate) const IDLE: &str = "idle";

/// The moment of the reading after concurrency `c`.
pub(crate) fn after(c: usize) -> String {
    format!("after C={c}")
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / f64::from(1u32 << 20))
}

/// The tail target read off `block` for the target `name`: its p99 over
/// the floor's and whether that is within 1 ms, or why it is not read —
/// the floor stalled or did not carry the offered rate (open-loop), or
/// the target did not carry it (not met, whatever its tail). Closed-loop
/// nothing arrives late, so the same reading serves both kinds of block.
fn tail(block: Option<&Block>, name: &str) -> String {
    let Some(block) = block else {
        return "not measured".to_owned();
    };
    match (block.floor(), block.target(name)) {
        (Some(floor), _) if floor.stalled() => format!(
            "not measured — both floor runs stalled (the better p99 {:.2} ms, the median \
             {:.2} ms): run the bench again",
            floor.p99_us / 1000.0,
            floor.p50_us / 1000.0
        ),
        (Some(floor), _) if floor.late > LATE => format!(
            "not measured — the floor did not carry the rate ({:.1} % of its arrivals sent \
             over a millisecond late)",
            floor.late * 100.0
        ),
        (Some(_), Some(target)) if target.late > LATE => format!(
            "NOT met — it did not carry the rate ({:.1} % of its arrivals sent over a \
             millisecond late)",
            target.late * 100.0
        ),
        _ => match block.target_added_p99_ms(name) {
            Some(added) => format!(
                "{added:+.2} ms — {}",
                if added <= 1.0 { "met" } else { "NOT met" }
            ),
            None => "not measured".to_owned(),
        },
    }
}

/// The targets, each with what this run measured and whether it
/// was met (printed, never asserted).
pub(crate) fn targets(blocks: &[Block], memory: &MemoryLog) -> String {
    let mut out = String::from("targets (issue 16; read off this run, not asserted):\n");
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let block = |c: usize| {
        blocks
            .iter()
            .find(|b| b.concurrency == c && b.offered.is_none())
    };
    for name in TARGETS {
        match block(16).and_then(|b| b.target_ratio(name)) {
            Some(ratio) => {
                let _ = writeln!(
                    out,
                    "  {name} at C=16 ≥ 0.50 × floor: {ratio:.2} — {}",
                    verdict(ratio >= 0.5)
                );
            }
            None => {
                let _ = writeln!(out, "  {name} at C=16 ≥ 0.50 × floor: not measured");
            }
        }
    }
    let open = blocks
        .iter()
        .find(|b| b.concurrency == TAIL_AT && b.offered.is_some());
    for name in TARGETS {
        let label = format!("  {name} at C={TAIL_AT} closed-loop, p99 over the floor's ≤ 1 ms");
        let _ = writeln!(out, "{label}: {}", tail(block(TAIL_AT), name));
    }
    for name in TARGETS {
        let mut label = format!("  {name} at C={TAIL_AT} open-loop, p99 over the floor's ≤ 1 ms");
        if let Some(rate) = open.and_then(|b| b.offered) {
            let _ = write!(label, " (both at {rate:.0} req/s offered)");
        }
        let _ = writeln!(out, "{label}: {}", tail(open, name));
    }
    match memory.at(IDLE) {
        Some(idle) => {
            let _ = writeln!(
                out,
                "  RSS idle ≤ 30 MB: {} — {}",
                mib(idle.rss),
                verdict(idle.rss <= 30 << 20)
            );
        }
        None => out.push_str("  RSS idle ≤ 30 MB: not measured\n"),
    }
    match memory.at(&after(64)) {
        Some(last) => {
            let _ = writeln!(
                out,
                "  RSS after the C=64 runs ≤ 80 MB: {} (peak {}) — {}",
                mib(last.rss),
                mib(last.peak),
                verdict(last.rss <= 80 << 20)
            );
        }
        None => out.push_str("  RSS after the C=64 runs ≤ 80 MB: not measured\n"),
    }
    out
}

/// One scenario at one concurrency in the sweep: its runs read together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    /// Mean req/s and lowest p99 of its runs.
    pub(crate) runs: Runs,
    /// The hop's cores busy, the mean of its runs.
    pub(crate) cores: Option<f64>,
    /// The hop's CPU µs per answer, the mean of its runs.
    pub(crate) cpu_us: Option<f64>,
    /// Failed answers, all its runs together.
    pub(crate) failures: u64,
}

/// The name of `name`'s second run.
fn second_run(name: &str) -> String {
    if name == FLOOR {
        FLOOR_AGAIN.to_owned()
    } else {
        again(name)
    }
}

impl Block {
    /// The scenario `name` (its run and its run again, if it ran twice).
    pub(crate) fn point(&self, name: &str) -> Option<Point> {
        let second = second_run(name);
        let runs = self.runs(name, &second)?;
        let rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.name == name || r.name == second)
            .collect();
        let mean = |values: Vec<f64>| {
            (values.len() == rows.len() && !values.is_empty())
                .then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        Some(Point {
            runs,
            cores: mean(rows.iter().filter_map(|r| r.cpu_cores).collect()),
            cpu_us: mean(rows.iter().filter_map(|r| r.cpu_us).collect()),
            failures: rows.iter().map(|r| r.figures.failures()).sum(),
        })
    }

    /// The scenarios it ran, each once (not their second runs), in order.
    fn scenario_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for row in &self.rows {
            let first = self
                .rows
                .iter()
                .find(|r| second_run(&r.name) == row.name)
                .map_or(row.name.as_str(), |r| r.name.as_str());
            if !names.contains(&first) {
                names.push(first);
            }
        }
        names
    }
}

/// What issue 41 asks of every scenario at each level above [`SWEEP_BASE`]:
/// its req/s at least this share of its req/s at [`SWEEP_BASE`].
pub(crate) const HOLDS: f64 = 0.9;

/// The sweep: for each upstream cap, every scenario at every closed-loop
/// concurrency — req/s, p99, the hop's CPU as cores busy and per answer,
/// failures, and req/s as a share of its req/s at [`SWEEP_BASE`] — then,
/// per scenario, whether it held at the levels above (at least [`HOLDS`]
/// of it, no failure, its CPU use not falling as the queue grew). The
/// floor's line is the machine's own: a floor that falls measures the
/// rig, not the service.
pub(crate) fn sweep(blocks: &[Block], heading: &str) -> String {
    let mut out = String::new();
    let mut caps: Vec<Option<usize>> = Vec::new();
    for block in blocks {
        if !caps.contains(&block.cap) {
            caps.push(block.cap);
        }
    }
    for cap in caps {
        let closed: Vec<&Block> = blocks
            .iter()
            .filter(|b| b.cap == cap && b.offered.is_none())
            .collect();
        let Some(first) = closed.first() else {
            continue;
        };
        let base = closed.iter().find(|b| b.concurrency == SWEEP_BASE);
        let _ = writeln!(
            out,
            "### Sweep, upstream cap {} — {heading}\n",
            cap_text(cap)
        );
        let _ = writeln!(
            out,
            "| scenario | C | req/s | p99 ms | hop CPU cores | hop CPU µs/answer | × its C={SWEEP_BASE} req/s | failed |"
        );
        let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|");
        let names = first.scenario_names();
        let mut verdicts = Vec::new();
        for name in &names {
            let base_point = base.and_then(|b| b.point(name));
            let mut shares = Vec::new();
            let mut failures = 0;
            let mut cores_fell = false;
            for block in &closed {
                let Some(point) = block.point(name) else {
                    continue;
                };
                let share = base_point
                    .filter(|b| b.runs.rate > 0.0)
                    .map(|b| point.runs.rate / b.runs.rate);
                if block.concurrency > SWEEP_BASE {
                    shares.extend(share.map(|s| (block.concurrency, s)));
                    failures += point.failures;
                    if let (Some(now), Some(then)) = (point.cores, base_point.and_then(|b| b.cores))
                    {
                        cores_fell |= now < then * HOLDS;
                    }
                }
                let number = |v: Option<f64>, digits: usize| {
                    v.map_or("—".to_owned(), |v| format!("{v:.digits$}"))
                };
                let failed = if point.failures == 0 {
                    "0".to_owned()
                } else {
                    format!("**{}**", point.failures)
                };
                let _ = writeln!(
                    out,
                    "| {name} | {} | {:.0} | {:.2} | {} | {} | {} | {failed} |",
                    block.concurrency,
                    point.runs.rate,
                    point.runs.p99_us / 1000.0,
                    number(point.cores, 2),
                    number(point.cpu_us, 0),
                    number(share, 2),
                );
            }
            if shares.is_empty() {
                continue;
            }
            let listed: Vec<String> = shares
                .iter()
                .map(|(c, s)| format!("C={c} {s:.2}"))
                .collect();
            let held = shares.iter().all(|(_, s)| *s >= HOLDS) && failures == 0 && !cores_fell;
            let mut why = Vec::new();
            if shares.iter().any(|(_, s)| *s < HOLDS) {
                why.push(format!("req/s below {HOLDS:.2} of C={SWEEP_BASE}'s"));
            }
            if failures > 0 {
                why.push(format!("{failures} failed answers"));
            }
            if cores_fell {
                why.push("its CPU use fell as the queue grew".to_owned());
            }
            let verdict = if name == &FLOOR {
                "the rig's own".to_owned()
            } else if held {
                "held".to_owned()
            } else {
                format!("NOT held: {}", why.join(", "))
            };
            verdicts.push(format!(
                "  {name}: {} × its C={SWEEP_BASE} req/s — {verdict}",
                listed.join(", ")
            ));
        }
        out.push('\n');
        for line in verdicts {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::scenario::{MCP_READ_FILE, NC_READ};

    fn row(name: &str, requests: u64, p99_us: u64) -> Row {
        Row {
            name: name.to_owned(),
            figures: Figures {
                requests,
                duration: Duration::from_secs(10),
                p50_us: p99_us / 2,
                p99_us,
                ..Figures::default()
            },
            cpu_us: Some(30.0),
            cpu_cores: Some(1.5),
        }
    }

    fn block(c: usize) -> Block {
        Block {
            concurrency: c,
            offered: None,
            cap: None,
            rows: vec![
                row(FLOOR, 300_000, 1_000),
                row(NC_READ, 160_000, 2_500),
                row(MCP_READ_FILE, 100_000, 1_800),
                row(&again(NC_READ), 180_000, 3_000),
                row(&again(MCP_READ_FILE), 100_000, 1_500),
                row(FLOOR_AGAIN, 340_000, 1_400),
            ],
        }
    }

    #[test]
    fn the_floor_is_the_mean_rate_and_the_lower_p99_of_its_runs_and_rows_are_read_against_it() {
        let b = block(16);
        let floor = b.floor().unwrap();
        assert!((floor.rate - 32_000.0).abs() < 1e-6);
        assert!((floor.p99_us - 1_000.0).abs() < 1e-6);
        assert!((b.ratio(NC_READ).unwrap() - 0.5).abs() < 1e-9);
        assert!((b.added_p99_ms(NC_READ).unwrap() - 1.5).abs() < 1e-9);
        assert!((b.added_p99_ms(MCP_READ_FILE).unwrap() - 0.8).abs() < 1e-9);
        // A target's two runs are read as the floor's: the mean rate, the
        // lower p99.
        let nc = b.target(NC_READ).unwrap();
        assert_eq!(nc.count, 2);
        assert!((nc.rate - 17_000.0).abs() < 1e-6);
        assert!((nc.p99_us - 2_500.0).abs() < 1e-6);
        assert!((b.target_ratio(NC_READ).unwrap() - 17.0 / 32.0).abs() < 1e-9);
        assert!((b.target_added_p99_ms(NC_READ).unwrap() - 1.5).abs() < 1e-9);
        assert!((b.target_added_p99_ms(MCP_READ_FILE).unwrap() - 0.5).abs() < 1e-9);
        // A floor run stalled by delayed ACKs does not lift the reference.
        let mut stalled = block(32);
        stalled.rows[5].figures.p99_us = 45_000;
        assert!((stalled.floor().unwrap().p99_us - 1_000.0).abs() < 1e-6);
        assert!((stalled.added_p99_ms(NC_READ).unwrap() - 1.5).abs() < 1e-9);
        assert_eq!(b.ratio("no such row"), None);
        let empty = Block {
            concurrency: 16,
            offered: None,
            cap: None,
            rows: vec![row(NC_READ, 1, 1)],
        };
        assert_eq!(empty.floor(), None);
        assert_eq!(empty.ratio(NC_READ), None);
        assert_eq!(empty.target_ratio(NC_READ), None);
        assert_eq!(empty.target(NC_READ).unwrap().count, 1);
    }

    #[test]
    fn the_table_has_a_row_per_run_and_says_failures_loudly() {
        let mut b = block(32);
        b.rows[1].figures.bad_status = 3;
        b.rows[1].figures.sample = Some("429 {}".to_owned());
        let table = b.table("SQLite");
        assert!(table.starts_with("### C=32 — SQLite\n"), "{table}");
        assert!(
            table.contains(
                "floor: 32000 req/s (mean of its two runs), p99 1.00 ms (the lower of its two runs)"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| BFF nc/read (4 KiB) | 16000 | 1.25 | 2.50 | 0.50 | +1.50 | 30 | 1.50 | **3** |"
            ),
            "{table}"
        );
        assert!(
            table.contains("FAILED: BFF nc/read (4 KiB) at C=32: 3 non-2xx"),
            "{table}"
        );
        assert!(
            table.contains(
                "BFF nc/read (4 KiB): 17000 req/s (mean of its two runs), 0.53 × floor; p99 2.50 ms (the lower of its two runs), +1.50 ms over the floor's"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| BFF nc/read (4 KiB), again | 18000 | 1.50 | 3.00 | 0.56 | +2.00 | 30 | 1.50 | 0 |"
            ),
            "{table}"
        );
        assert_eq!(b.failures(), 3);
        assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 7);
    }

    #[test]
    fn the_targets_are_read_off_the_blocks_and_the_memory() {
        let blocks = [block(16), block(32), block(64)];
        let mut memory = MemoryLog::default();
        let reading = |mb: u64| Memory {
            rss: mb << 20,
            peak: (mb + 5) << 20,
        };
        memory.note(IDLE, Some(reading(12)));
        memory.note(after(16), Some(reading(40)));
        memory.note(after(64), Some(reading(90)));
        memory.note("gone", None);
        let text = targets(&blocks, &memory);
        assert!(
            text.contains("BFF nc/read (4 KiB) at C=16 ≥ 0.50 × floor: 0.53 — met"),
            "{text}"
        );
        assert!(
            text.contains(
                "MCP acdm_read_nextcloud_file (4 KiB) at C=16 ≥ 0.50 × floor: 0.31 — NOT met"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "BFF nc/read (4 KiB) at C=32 closed-loop, p99 over the floor's ≤ 1 ms: +1.50 ms — NOT met"
            ),
            "{text}"
        );
        // The better of the target's two runs, as the floor's.
        assert!(text.contains("MCP acdm_read_nextcloud_file (4 KiB) at C=32 closed-loop, p99 over the floor's ≤ 1 ms: +0.50 ms — met"), "{text}");
        assert!(text.contains("RSS idle ≤ 30 MB: 12.0 MB — met"), "{text}");
        assert!(
            text.contains("RSS after the C=64 runs ≤ 80 MB: 90.0 MB (peak 95.0 MB) — NOT met"),
            "{text}"
        );
        assert_eq!(
            memory.line(),
            "service RSS: idle 12.0 MB, after C=16 40.0 MB, after C=64 90.0 MB; peak (VmHWM) 95.0 MB"
        );
        let none = targets(&[], &MemoryLog::default());
        assert_eq!(none.matches("not measured").count(), 8, "{none}");
        // Both floor runs stalled at C=32 (p99 sixty and seventy times
        // their medians): no tail is read off that block, met or not.
        let mut stalled = block(32);
        stalled.rows[0].figures.p99_us = 42_000;
        stalled.rows[5].figures.p99_us = 45_000;
        assert!(stalled.floor().unwrap().stalled());
        assert!(!block(32).floor().unwrap().stalled());
        let text = targets(&[block(16), stalled, block(64)], &memory);
        assert_eq!(text.matches("C=32 closed-loop, p99 over the floor's ≤ 1 ms: not measured — both floor runs stalled (the better p99 42.00 ms, the median 0.60 ms): run the bench again").count(), 2, "{text}");
        assert!(
            !text.contains("C=32 closed-loop, p99 over the floor's ≤ 1 ms: +"),
            "{text}"
        );
    }

    /// The C=32 open-loop block: every run carried 8000 req/s offered.
    fn open_block() -> Block {
        let mut rows = vec![
            row(FLOOR, 80_000, 400),
            row(NC_READ, 80_000, 1_100),
            row(MCP_READ_FILE, 80_000, 1_500),
            row(&again(MCP_READ_FILE), 80_000, 1_600),
            row(&again(NC_READ), 80_000, 1_300),
            row(FLOOR_AGAIN, 80_000, 500),
        ];
        rows[1].figures.late = 10;
        Block {
            concurrency: 32,
            offered: Some(8000.0),
            cap: None,
            rows,
        }
    }

    #[test]
    fn the_open_loop_tail_is_read_at_one_offered_rate_and_late_arrivals_count() {
        let memory = MemoryLog::default();
        let open = open_block();
        let table = open.table("SQLite");
        assert!(
            table.starts_with("### C=32, open-loop at 8000 req/s offered — SQLite\n"),
            "{table}"
        );
        assert!(
            table.contains(
                "| BFF nc/read (4 KiB) | 8000 | 0.55 | 1.10 | 1.00 | +0.70 | 30 | 1.50 | 10 (0.01 %) | 0 |"
            ),
            "{table}"
        );
        // The closed-loop block has no late column.
        assert!(!block(32).table("x").contains("late"));
        let text = targets(&[block(16), block(32), open.clone(), block(64)], &memory);
        // The closed-loop reading is still printed, from the closed-loop block.
        assert!(text.contains("BFF nc/read (4 KiB) at C=32 closed-loop, p99 over the floor's ≤ 1 ms: +1.50 ms — NOT met"), "{text}");
        // Open-loop: the lower p99 of two runs over the floor's lower.
        assert!(text.contains("BFF nc/read (4 KiB) at C=32 open-loop, p99 over the floor's ≤ 1 ms (both at 8000 req/s offered): +0.70 ms — met"), "{text}");
        assert!(text.contains("MCP acdm_read_nextcloud_file (4 KiB) at C=32 open-loop, p99 over the floor's ≤ 1 ms (both at 8000 req/s offered): +1.10 ms — NOT met"), "{text}");
        // A target whose every run had more than 1 % of its arrivals wait
        // for a connection did not carry the rate: not met, whatever its tail.
        let mut behind = open.clone();
        behind.rows[1].figures.late = 2_000;
        behind.rows[4].figures.late = 1_200;
        let text = targets(&[behind], &memory);
        assert!(text.contains("BFF nc/read (4 KiB) at C=32 open-loop, p99 over the floor's ≤ 1 ms (both at 8000 req/s offered): NOT met — it did not carry the rate (1.5 % of its arrivals sent over a millisecond late)"), "{text}");
        // One run that carried it is enough, and the tail is that run's:
        // the run with 2.5 % late arrivals has the lower p99 (1.1 ms) but
        // is not read.
        let mut one = open.clone();
        one.rows[1].figures.late = 2_000;
        let text = targets(&[one.clone()], &memory);
        assert!(text.contains("BFF nc/read (4 KiB) at C=32 open-loop, p99 over the floor's ≤ 1 ms (both at 8000 req/s offered): +0.90 ms — met"), "{text}");
        let nc = one.target(NC_READ).unwrap();
        assert!((nc.p99_us - 1_300.0).abs() < 1e-6);
        assert!(nc.late < LATE);
        // A failed answer in the open block says it was open-loop.
        one.rows[2].figures.bad_body = 1;
        assert!(one.table("x").contains("FAILED: MCP acdm_read_nextcloud_file (4 KiB) at C=32 open-loop: 0 non-2xx, 1 bad bodies"));
        // A floor that did not carry the rate measures nothing.
        let mut slow_floor = open;
        slow_floor.rows[0].figures.late = 4_000;
        slow_floor.rows[5].figures.late = 4_000;
        let text = targets(&[slow_floor], &memory);
        assert_eq!(text.matches("not measured — the floor did not carry the rate (5.0 % of its arrivals sent over a millisecond late)").count(), 2, "{text}");
    }

    /// A closed-loop block at `c` with the floor at `floor` req/s and the
    /// BFF read at `read` req/s using `cores` of CPU, each run twice, and
    /// /healthz once.
    fn sweep_block(c: usize, floor: u64, read: u64, cores: f64) -> Block {
        let with_cores = |mut r: Row| {
            r.cpu_cores = Some(cores);
            r
        };
        Block {
            concurrency: c,
            offered: None,
            cap: Some(32),
            rows: vec![
                row(FLOOR, floor * 10, 1_000),
                with_cores(row(NC_READ, read * 10, 4_000)),
                row("service GET /healthz", 500_000, 900),
                with_cores(row(&again(NC_READ), read * 10, 3_000)),
                row(FLOOR_AGAIN, floor * 10, 1_200),
            ],
        }
    }

    #[test]
    fn the_sweep_reads_every_level_against_c64_and_says_what_did_not_hold() {
        let mut blocks = vec![
            sweep_block(16, 40_000, 20_000, 1.6),
            sweep_block(64, 40_000, 20_000, 1.8),
            sweep_block(256, 38_800, 19_000, 1.8),
            sweep_block(1024, 38_000, 15_000, 1.2),
        ];
        // A failed answer at C=1024 counts against the read.
        blocks[3].rows[3].figures.bad_status = 2;
        // The open-loop block is not part of the sweep.
        blocks.push(Block {
            offered: Some(1000.0),
            ..sweep_block(32, 1, 1, 0.1)
        });
        let text = sweep(&blocks, "SQLite");
        assert!(
            text.starts_with("### Sweep, upstream cap 32 — SQLite\n"),
            "{text}"
        );
        // One row per scenario and level, the two runs read together.
        assert!(
            text.contains(
                "| BFF nc/read (4 KiB) | 1024 | 15000 | 3.00 | 1.20 | 30 | 0.75 | **2** |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| BFF nc/read (4 KiB) | 64 | 20000 | 3.00 | 1.80 | 30 | 1.00 | 0 |"),
            "{text}"
        );
        assert!(
            text.contains("| service GET /healthz | 256 | 50000 | 0.90 | 1.50 | 30 | 1.00 | 0 |"),
            "{text}"
        );
        assert!(!text.contains("| 32 |"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("| ")).count(),
            1 + 3 * 4,
            "{text}"
        );
        assert!(
            text.contains(
                "  floor: nginx one hop (GET 4 KiB): C=256 0.97, C=1024 0.95 × its C=64 req/s — the rig's own"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  BFF nc/read (4 KiB): C=256 0.95, C=1024 0.75 × its C=64 req/s — NOT held: req/s below 0.90 of C=64's, 2 failed answers, its CPU use fell as the queue grew"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  service GET /healthz: C=256 1.00, C=1024 1.00 × its C=64 req/s — held"
            ),
            "{text}"
        );
        // Without a C=64 block there is nothing to read the others against.
        let without = sweep(&[sweep_block(256, 1, 1, 1.0)], "x");
        assert!(without.contains("| — | 0 |"), "{without}");
        assert!(!without.contains("held"), "{without}");
        // Each cap has its own sweep, in the order they ran.
        let mut other = sweep_block(64, 40_000, 30_000, 1.0);
        other.cap = None;
        let both = sweep(&[sweep_block(64, 1, 1, 1.0), other], "x");
        let first = both.find("upstream cap 32").unwrap();
        let second = both.find("upstream cap default").unwrap();
        assert!(first < second, "{both}");
    }
}
