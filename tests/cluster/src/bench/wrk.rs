//! The load generator: Debian's wrk, driven by a Lua script per scenario.
//!
//! [`script`] writes the request (method, headers, body) and three hooks:
//! `response` judges every answer as [`Judge::check`] does (a status
//! outside 2xx, a body without the expected text or with the refused
//! one, e.g. `"isError":true`, is a failure, and the first one is kept as
//! a sample), and `done` prints one line of figures that [`parse`] reads:
//! requests, duration, the latency percentiles from wrk's own histogram,
//! the failures and wrk's socket errors. wrk's own report is kept in the
//! run's log folder.
//!
//! A run is closed-loop (each connection sends its next request as soon as
//! its answer is in: the load is whatever the server carries) or, with a
//! [`Pace`], open-loop at a fixed offered rate: arrivals are due at random
//! (exponential gaps, a Poisson stream per wrk thread) at a rate set
//! beforehand, each taken by the thread's next free connection. wrk's
//! `delay` hook holds each connection until the next arrival is due. Its
//! timers count whole milliseconds of the wall clock, so requests leave at
//! millisecond ticks, up to a millisecond early, about rate/1000 at a time
//! across the threads: the arrivals per millisecond are Poisson, their
//! spread within it is not. The schedule is absolute, so the mean rate is
//! the offered one. An arrival whose connection comes free more than a
//! millisecond after it was due (the server was behind, or wrk's own
//! thread waited for a core) is sent at once and counted `late`. Latency
//! is measured from the send, as wrk does: a late arrival's wait is not in
//! the histogram, which is why the count is printed with it. Every run
//! seeds thread n's stream with n, so runs see the same arrival pattern.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

/// The first word of the line the `done` hook prints.
const FIGURES: &str = "acdm-bench";
/// The first word of the line with the first failure's status and body.
const SAMPLE: &str = "acdm-bench-sample";

/// What an answer must be to count as a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Judge {
    /// Text every good body holds.
    pub(crate) expect: String,
    /// Text no good body holds (`"isError":true` for MCP calls).
    pub(crate) refuse: Option<String>,
}

impl Judge {
    /// Why an answer fails, if it does: the same rule as the script's
    /// `response` hook.
    pub(crate) fn check(&self, status: u16, body: &str) -> Result<(), String> {
        let excerpt = || body.chars().take(300).collect::<String>();
        if !(200..300).contains(&status) {
            return Err(format!("HTTP {status}: {}", excerpt()));
        }
        if !body.contains(&self.expect) {
            return Err(format!("no `{}` in the answer: {}", self.expect, excerpt()));
        }
        if let Some(refuse) = &self.refuse
            && body.contains(refuse)
        {
            return Err(format!("`{refuse}` in the answer: {}", excerpt()));
        }
        Ok(())
    }
}

/// One request, as wrk sends it again and again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// `GET` or `POST`.
    pub(crate) method: &'static str,
    /// Headers besides `Host` (wrk sends it).
    pub(crate) headers: Vec<(String, String)>,
    /// The body, if any.
    pub(crate) body: Option<String>,
}

/// `text` as a Lua string literal: printable ASCII as it is, quotes and
/// backslashes escaped, every other byte (newlines, UTF-8) as a decimal
/// escape of three digits (so a digit after it is not read as its own).
pub(crate) fn lua_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for byte in text.bytes() {
        match byte {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(byte));
            }
            0x20..=0x7e => out.push(char::from(byte)),
            _ => out.push_str(&format!("\\{byte:03}")),
        }
    }
    out.push('"');
    out
}

/// An open-loop run's arrivals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pace {
    /// Requests each wrk thread sends per second (the offered rate over
    /// the threads).
    pub(crate) per_thread: f64,
}

impl Pace {
    /// `rate` requests per second offered by `threads` wrk threads.
    pub(crate) fn new(rate: f64, threads: usize) -> Self {
        Self {
            per_thread: rate / threads.max(1) as f64,
        }
    }

    /// The Lua that paces the requests: a thread's clock (LuaJIT's FFI on
    /// `clock_gettime(CLOCK_MONOTONIC)`, as wrk exposes none), its arrival
    /// schedule and wrk's `delay` hook.
    fn lua(&self) -> String {
        let gap_ms = 1000.0 / self.per_thread.max(f64::MIN_POSITIVE);
        format!(
            r#"local ffi = require("ffi")
ffi.cdef[[
typedef struct {{ long tv_sec; long tv_nsec; }} acdm_bench_timespec;
int clock_gettime(int clock, acdm_bench_timespec *now);
]]
local clock = ffi.new("acdm_bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1000000
end
local gap_ms = {gap_ms:.6}
local due_ms = nil

function delay()
  local now = now_ms()
  if due_ms == nil then
    math.randomseed(seed or 1)
    due_ms = now
  end
  local wait = due_ms - now
  due_ms = due_ms - gap_ms * math.log(1 - math.random())
  if wait < -1 then
    late = late + 1
  end
  if wait <= 0 then
    return 0
  end
  return math.floor(wait)
end
"#
        )
    }
}

/// The Lua script for `request`, judged by `judge`; open-loop at `pace`'s
/// rate when given, else closed-loop.
pub(crate) fn script(name: &str, request: &Request, judge: &Judge, pace: Option<Pace>) -> String {
    let mut out = vec![
        format!("-- Generated by acdm-cluster bench: {name}"),
        format!("wrk.method = {}", lua_string(request.method)),
    ];
    if let Some(body) = &request.body {
        out.push(format!("wrk.body = {}", lua_string(body)));
    }
    for (name, value) in &request.headers {
        out.push(format!(
            "wrk.headers[{}] = {}",
            lua_string(name),
            lua_string(value)
        ));
    }
    out.push(format!("local expect = {}", lua_string(&judge.expect)));
    out.push(format!(
        "local refuse = {}",
        judge.refuse.as_deref().map_or("nil".to_owned(), lua_string)
    ));
    if let Some(pace) = pace {
        out.push(pace.lua());
    }
    out.push(
        r#"local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("seed", #threads)
end

function init(args)
  bad_status = 0
  bad_body = 0
  late = 0
  sample = ""
end

function response(status, headers, body)
  body = body or ""
  local failed = false
  if status < 200 or status > 299 then
    bad_status = bad_status + 1
    failed = true
  elseif not string.find(body, expect, 1, true)
      or (refuse ~= nil and string.find(body, refuse, 1, true)) then
    bad_body = bad_body + 1
    failed = true
  end
  if failed and sample == "" then
    sample = status .. " " .. string.sub(body, 1, 300)
  end
end

function done(summary, latency, requests)
  local statuses, bodies, lates, first = 0, 0, 0, ""
  for _, thread in ipairs(threads) do
    statuses = statuses + thread:get("bad_status")
    bodies = bodies + thread:get("bad_body")
    lates = lates + thread:get("late")
    if first == "" then
      first = thread:get("sample")
    end
  end
  io.write(string.format(
    "acdm-bench requests=%d duration_us=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d bad_status=%d bad_body=%d late=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration,
    math.floor(latency:percentile(50)), math.floor(latency:percentile(90)),
    math.floor(latency:percentile(99)), math.floor(latency.max),
    statuses, bodies, lates,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
  if first ~= "" then
    io.write("acdm-bench-sample " .. (string.gsub(first, "%s+", " ")) .. "\n")
  end
end
"#
        .to_owned(),
    );
    out.join("\n")
}

/// What one wrk run measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Answers received.
    pub(crate) requests: u64,
    /// How long it ran.
    pub(crate) duration: Duration,
    /// Latency percentiles and maximum, in microseconds.
    pub(crate) p50_us: u64,
    /// 90th percentile.
    pub(crate) p90_us: u64,
    /// 99th percentile.
    pub(crate) p99_us: u64,
    /// The slowest answer.
    pub(crate) max_us: u64,
    /// Answers with a status outside 2xx.
    pub(crate) bad_status: u64,
    /// 2xx answers whose body failed the judge.
    pub(crate) bad_body: u64,
    /// Open-loop arrivals that waited more than a millisecond for a free
    /// connection (always 0 closed-loop).
    pub(crate) late: u64,
    /// wrk's socket errors: connect, read, write, timeout.
    pub(crate) socket_errors: [u64; 4],
    /// The first failure: its status and the start of its body.
    pub(crate) sample: Option<String>,
}

impl Figures {
    /// Answers per second.
    pub(crate) fn rate(&self) -> f64 {
        let seconds = self.duration.as_secs_f64();
        if seconds > 0.0 {
            self.requests as f64 / seconds
        } else {
            0.0
        }
    }

    /// Every failure: bad answers and socket errors.
    pub(crate) fn failures(&self) -> u64 {
        self.bad_status + self.bad_body + self.socket_errors.iter().sum::<u64>()
    }

    /// The failures in words, for a run that had some.
    pub(crate) fn failure_summary(&self) -> String {
        let [connect, read, write, timeout] = self.socket_errors;
        let mut text = format!(
            "{} non-2xx, {} bad bodies, socket errors: {connect} connect, {read} read, {write} write, {timeout} timeout",
            self.bad_status, self.bad_body
        );
        if let Some(sample) = &self.sample {
            text.push_str(&format!("; first: {sample}"));
        }
        text
    }

    /// These figures and `other`'s failures (a warm-up's), together.
    pub(crate) fn with_failures_of(mut self, other: &Self) -> Self {
        self.bad_status += other.bad_status;
        self.bad_body += other.bad_body;
        for (mine, theirs) in self.socket_errors.iter_mut().zip(other.socket_errors) {
            *mine += theirs;
        }
        if self.sample.is_none() {
            self.sample.clone_from(&other.sample);
        }
        self
    }
}

/// Reads the figures the script's `done` hook printed among wrk's output.
pub(crate) fn parse(output: &str) -> Result<Figures> {
    let line = output
        .lines()
        .find(|l| l.split_whitespace().next() == Some(FIGURES))
        .with_context(|| format!("no `{FIGURES}` line in wrk's output:\n{output}"))?;
    let mut figures = Figures::default();
    for pair in line.split_whitespace().skip(1) {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("`{pair}` is not key=value in `{line}`"))?;
        let value: u64 = value
            .parse()
            .with_context(|| format!("`{value}` is not a count in `{line}`"))?;
        match key {
            "requests" => figures.requests = value,
            "duration_us" => figures.duration = Duration::from_micros(value),
            "p50_us" => figures.p50_us = value,
            "p90_us" => figures.p90_us = value,
            "p99_us" => figures.p99_us = value,
            "max_us" => figures.max_us = value,
            "bad_status" => figures.bad_status = value,
            "bad_body" => figures.bad_body = value,
            "late" => figures.late = value,
            "connect" => figures.socket_errors[0] = value,
            "read" => figures.socket_errors[1] = value,
            "write" => figures.socket_errors[2] = value,
            "timeout" => figures.socket_errors[3] = value,
            other => bail!("unknown figure `{other}` in `{line}`"),
        }
    }
    figures.sample = output.lines().find_map(|l| {
        l.strip_prefix(SAMPLE)
            .map(|rest| rest.trim().to_owned())
            .filter(|s| !s.is_empty())
    });
    Ok(figures)
}

/// How wrk runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    /// Connections kept open (the concurrency).
    pub(crate) connections: usize,
    /// wrk's threads (at most `connections`).
    pub(crate) threads: usize,
    /// How long.
    pub(crate) duration: Duration,
}

/// wrk's arguments for `load` against `url` with `script`.
pub(crate) fn arguments(load: Load, script: &Path, url: &str) -> Vec<String> {
    let threads = load.threads.clamp(1, load.connections.max(1));
    vec![
        "--threads".to_owned(),
        threads.to_string(),
        "--connections".to_owned(),
        load.connections.to_string(),
        "--duration".to_owned(),
        format!("{}s", load.duration.as_secs().max(1)),
        "--timeout".to_owned(),
        "10s".to_owned(),
        "--script".to_owned(),
        script.display().to_string(),
        url.to_owned(),
    ]
}

/// Runs wrk with `script` against `addr` + `path`; its output is appended
/// to `log`.
pub(crate) async fn run(
    load: Load,
    script: &Path,
    addr: SocketAddr,
    path: &str,
    log: &Path,
) -> Result<Figures> {
    let url = format!("http://{addr}{path}");
    let output = Command::new("wrk")
        .args(arguments(load, script, &url))
        .kill_on_drop(true)
        .output()
        .await
        .context("cannot run wrk (Debian: apt-get install wrk; `cargo xtask setup` does)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let record = format!(
        "$ wrk {}\n{stdout}{stderr}\n",
        arguments(load, script, &url).join(" ")
    );
    {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        file.write_all(record.as_bytes())?;
    }
    if !output.status.success() {
        bail!("wrk failed ({}):\n{stdout}{stderr}", output.status);
    }
    parse(&stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_strings_escape_quotes_backslashes_and_bytes_outside_ascii() {
        assert_eq!(lua_string("plain"), "\"plain\"");
        assert_eq!(
            lua_string(r#"{"a":"b\c"}"#),
            r#""{\"a\":\"b\\c\"}""#.to_owned()
        );
        assert_eq!(lua_string("a\nb"), "\"a\\010b\"");
        assert_eq!(lua_string("é"), "\"\\195\\169\"");
        // Lua reads at most three digits: a digit after an escape stays a digit.
        assert_eq!(lua_string("\n1"), "\"\\0101\"");
    }

    #[test]
    fn the_script_sends_the_request_and_judges_every_answer() {
        let request = Request {
            method: "POST",
            headers: vec![("X-ACDM-Service-Auth".to_owned(), "tok".to_owned())],
            body: Some(r#"{"rel_path":"docs/report.md"}"#.to_owned()),
        };
        let judge = Judge {
            expect: "\"result\"".to_owned(),
            refuse: Some("\"isError\":true".to_owned()),
        };
        let text = script("BFF nc/read", &request, &judge, None);
        for needed in [
            "wrk.method = \"POST\"",
            r#"wrk.body = "{\"rel_path\":\"docs/report.md\"}""#,
            "wrk.headers[\"X-ACDM-Service-Auth\"] = \"tok\"",
            "local expect = \"\\\"result\\\"\"",
            "local refuse = \"\\\"isError\\\":true\"",
            "function response(status, headers, body)",
            "function done(summary, latency, requests)",
            "acdm-bench requests=%d",
        ] {
            assert!(text.contains(needed), "{needed} missing:\n{text}");
        }
        // Closed-loop: no delay hook, so each connection sends at once.
        assert!(!text.contains("function delay"), "{text}");
        let get = Request {
            method: "GET",
            headers: Vec::new(),
            body: None,
        };
        let text = script(
            "floor",
            &get,
            &Judge {
                expect: "x".to_owned(),
                refuse: None,
            },
            None,
        );
        assert!(text.contains("local refuse = nil"), "{text}");
        assert!(!text.contains("wrk.body"), "{text}");
    }

    #[test]
    fn the_judge_wants_a_2xx_with_the_expected_text_and_without_the_refused() {
        let judge = Judge {
            expect: "\"result\"".to_owned(),
            refuse: Some("\"isError\":true".to_owned()),
        };
        assert!(judge.check(200, r#"{"result":{"isError":false}}"#).is_ok());
        assert!(judge.check(200, r#"{"result":{"isError":true}}"#).is_err());
        assert!(judge.check(200, r#"{"error":{"code":-32602}}"#).is_err());
        let refused = judge.check(429, r#"{"result":{}}"#).unwrap_err();
        assert!(refused.starts_with("HTTP 429"), "{refused}");
        assert!(judge.check(207, r#"{"result":{}}"#).is_ok());
    }

    #[test]
    fn a_paced_script_holds_each_connection_until_the_threads_next_arrival() {
        let get = Request {
            method: "GET",
            headers: Vec::new(),
            body: None,
        };
        let judge = Judge {
            expect: "x".to_owned(),
            refuse: None,
        };
        // 8000 req/s over two threads: a mean gap of 0.25 ms per thread.
        let pace = Pace::new(8000.0, 2);
        assert!((pace.per_thread - 4000.0).abs() < 1e-9);
        let text = script("floor", &get, &judge, Some(pace));
        for needed in [
            "local gap_ms = 0.250000",
            "function delay()",
            "math.log(1 - math.random())",
            "late = late + 1",
            "thread:set(\"seed\", #threads)",
            "clock_gettime(1, clock)",
        ] {
            assert!(text.contains(needed), "{needed} missing:\n{text}");
        }
        // The schedule moves forward (an exponential gap is -mean·ln U),
        // in milliseconds, and only a wait of over a millisecond is late.
        for needed in [
            "due_ms = due_ms - gap_ms * math.log(1 - math.random())",
            "if wait < -1 then",
            "tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1000000",
            "return math.floor(wait)",
        ] {
            assert!(text.contains(needed), "{needed} missing:\n{text}");
        }
        // `late` starts at 0 in every thread, paced or not.
        assert!(text.contains("  late = 0\n"), "{text}");
        assert!(Pace::new(100.0, 0).per_thread > 0.0);
    }

    const OUTPUT: &str = "Running 10s test @ http://127.0.0.1:9/x
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   480.12us  300.00us  12.00ms   90.00%
  331234 requests in 10.00s, 1.40GB read
Requests/sec:  33120.00
Transfer/sec:    143.00MB
acdm-bench requests=331234 duration_us=10001234 p50_us=412 p90_us=700 p99_us=1530 max_us=12000 bad_status=2 bad_body=1 late=4 connect=0 read=3 write=0 timeout=0
acdm-bench-sample 429 {\"success\":false,\"code\":\"rate_limited\"}
";

    #[test]
    fn the_figures_line_is_read_from_wrks_output() {
        let figures = parse(OUTPUT).unwrap();
        assert_eq!(figures.requests, 331_234);
        assert_eq!(figures.duration, Duration::from_micros(10_001_234));
        assert_eq!(
            (
                figures.p50_us,
                figures.p90_us,
                figures.p99_us,
                figures.max_us
            ),
            (412, 700, 1530, 12_000)
        );
        assert_eq!((figures.bad_status, figures.bad_body), (2, 1));
        assert_eq!(figures.late, 4);
        assert_eq!(figures.socket_errors, [0, 3, 0, 0]);
        assert_eq!(figures.failures(), 6);
        assert!(
            (figures.rate() - 33_119.0).abs() < 1.0,
            "{}",
            figures.rate()
        );
        assert_eq!(
            figures.sample.as_deref(),
            Some("429 {\"success\":false,\"code\":\"rate_limited\"}")
        );
        let summary = figures.failure_summary();
        assert!(summary.contains("2 non-2xx, 1 bad bodies"), "{summary}");
        assert!(summary.contains("3 read"), "{summary}");
    }

    #[test]
    fn output_without_figures_or_with_a_bad_figure_is_an_error() {
        assert!(parse("Running 10s test\nRequests/sec: 1\n").is_err());
        assert!(parse("acdm-bench requests=x\n").is_err());
        assert!(parse("acdm-bench volume=3\n").is_err());
        let clean = parse("acdm-bench requests=5 duration_us=1000000\n").unwrap();
        assert_eq!(clean.failures(), 0);
        assert_eq!(clean.sample, None);
        assert!((clean.rate() - 5.0).abs() < 1e-9);
    }

    #[test]
    fn a_warm_ups_failures_count_with_the_run() {
        let run = parse("acdm-bench requests=5 duration_us=1000000 bad_status=1\n").unwrap();
        let warm_up = Figures {
            bad_body: 2,
            socket_errors: [1, 0, 0, 0],
            sample: Some("200 nope".to_owned()),
            ..Figures::default()
        };
        let both = run.with_failures_of(&warm_up);
        assert_eq!(both.failures(), 4);
        assert_eq!(both.requests, 5);
        assert_eq!(both.sample.as_deref(), Some("200 nope"));
    }

    #[test]
    fn wrk_runs_no_more_threads_than_connections() {
        let load = Load {
            connections: 1,
            threads: 2,
            duration: Duration::from_secs(10),
        };
        let args = arguments(load, Path::new("/s.lua"), "http://127.0.0.1:9/x");
        assert_eq!(
            args,
            [
                "--threads",
                "1",
                "--connections",
                "1",
                "--duration",
                "10s",
                "--timeout",
                "10s",
                "--script",
                "/s.lua",
                "http://127.0.0.1:9/x"
            ]
        );
    }
}
